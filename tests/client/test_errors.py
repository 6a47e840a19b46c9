"""Errors come back as the `HostError` subclass of their code, with `code`, `message`, `data`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from subagent_host.client import (
    ERRORS,
    HostError,
    InvalidParams,
    InvalidRequest,
    LaunchRejected,
    MethodNotFound,
    ResumeDenied,
    RunNotFound,
)
from subagent_host.client.errors import error_from
from subagent_host.errors import DOMAIN_ERRORS
from subagent_host.rpc import codes as server_codes
from subagent_host.rpc.wire import SessionId
from tests.client.conftest import started


def test_every_code_the_server_uses_has_its_own_class() -> None:
    used = {
        server_codes.PARSE_ERROR,
        server_codes.INVALID_REQUEST,
        server_codes.METHOD_NOT_FOUND,
        server_codes.INVALID_PARAMS,
        server_codes.INTERNAL_ERROR,
        server_codes.REQUEST_CANCELLED,
        *server_codes.CODES.values(),
    }
    assert set(ERRORS) == used
    assert all(kind.CODE == code and issubclass(kind, HostError) for code, kind in ERRORS.items())


def test_a_code_the_client_does_not_know_is_raised_as_a_host_error() -> None:
    error = error_from({"code": -32099, "message": "new", "data": {"x": 1}})
    assert type(error) is HostError and (error.code, error.message, error.data) == (
        -32099,
        "new",
        {"x": 1},
    )


async def test_each_refusal_raises_its_subclass_with_code_message_and_data(
    tmp_path: Path, framing: str
) -> None:
    async with started(tmp_path, framing) as (host, _seen):
        with pytest.raises(RunNotFound) as not_found:
            await host.status("0123456789abcdef")
        assert not_found.value.code == -32001 and "0123456789abcdef" in not_found.value.message

        with pytest.raises(InvalidParams) as invalid:
            await host.ping(session_id=SessionId("not a session id"))
        assert invalid.value.data["errors"][0]["path"] == "sessionId"

        with pytest.raises(LaunchRejected) as out_of_range:
            await host.spawn(command=("echo",), timeout_ms=-5)
        assert out_of_range.value.data["diagnostics"][0]["path"] == "timeoutMs"

        with pytest.raises(MethodNotFound) as missing:
            await host.request("no/such/method", {})
        assert missing.value.message == "method not found: no/such/method"

        with pytest.raises(ResumeDenied) as denied:
            await host.resume(token="not-a-token")
        assert denied.value.data["reason"] == "unknown-token"

        with pytest.raises(LaunchRejected) as rejected:
            await host.spawn(command=("echo",), preflight_id="pf-unknown")
        assert rejected.value.data["diagnostics"]

        assert (await host.ping()).pong  # the connection goes on after each


async def test_a_request_larger_than_the_server_reads_is_refused_in_its_words_not_left_waiting(
    tmp_path: Path,
) -> None:
    async with started(tmp_path, "ndjson", "--max-message-bytes", "4096") as (host, _seen):
        # Before the limit is known, the server itself refuses the message (with id null:
        # the call could not be told); after `ping`, the client knows it and refuses first.
        assert (await host.ping()).limits.max_message_bytes == 4096
        with pytest.raises(InvalidRequest) as too_large:
            await asyncio.wait_for(host.spawn(command=("echo", "x" * 5000)), 10)
        assert too_large.value.code == -32600
        assert too_large.value.message.startswith("message too large: ")
        assert too_large.value.message.endswith("(the limit is 4096 bytes)")
        assert (await host.ping()).pong  # nothing was sent: the connection goes on


def test_each_domain_error_has_the_client_class_of_its_name_and_code() -> None:
    classes = [
        *ERRORS.values(),
        *(sub for kind in ERRORS.values() for sub in kind.__subclasses__()),
    ]
    by_name = {kind.__name__: kind for kind in classes}
    for domain in DOMAIN_ERRORS:
        if domain.CODE in (server_codes.INTERNAL_ERROR, server_codes.REQUEST_CANCELLED):
            continue  # JSON-RPC's own codes: InternalError, RequestCancelled
        assert by_name[domain.__name__].CODE == domain.CODE
