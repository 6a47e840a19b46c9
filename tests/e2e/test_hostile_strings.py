"""Strings no store or `exec` can take are -32602 with their path, before anything starts.

A lone surrogate cannot be stored as UTF-8 and a NUL cannot be passed to a
process; either, anywhere in params, is refused up front (protocol.md §3.3).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.e2e.harness import (
    FramingName,
    error_of,
    frame,
    processes_below,
    result_of,
    running_server,
    state_args,
)
from tests.e2e.hostile import attack, summary

FRAMINGS: list[FramingName] = ["ndjson", "lsp"]
SURROGATE_MESSAGE = (
    "the value contains an unpaired surrogate (U+D800), which cannot be stored as UTF-8"
)


async def test_a_spawn_whose_label_is_a_lone_surrogate_is_invalid_params_and_starts_nothing(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path)) as server:
        error = await error_of(server, "spawn", {"command": ["sleep", "1000"], "label": "\ud800"})
        assert error["code"] == -32602
        assert error["data"]["errors"] == [{"path": "label", "message": SURROGATE_MESSAGE}]
        assert processes_below(server.pid) == []
        assert (await result_of(server, "status", {}))["runs"] == []


async def test_a_stop_whose_reason_is_a_lone_surrogate_is_invalid_params_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path)) as server:
        run = await result_of(server, "spawn", {"command": ["sleep", "1000"]})
        error = await error_of(server, "stop", {"runId": run["runId"], "reason": "\ud800"})
        assert error["code"] == -32602
        assert error["data"]["errors"] == [{"path": "reason", "message": SURROGATE_MESSAGE}]
        status = await result_of(server, "status", {"runId": run["runId"]})
        assert status["status"] == "running"
        assert psutil.pid_exists(status["children"][0]["pid"])
        stopped = await result_of(server, "stop", {"runId": run["runId"], "graceMs": 0})
        assert stopped["status"] == "cancelled"


async def test_every_string_field_of_every_method_survives_hostile_values(
    tmp_path: Path,
) -> None:
    report = await attack(tmp_path, time.monotonic)
    print(summary(report))  # the figure the README records (pytest -s)
    assert report.problems == []
    assert report.internal_errors == 0
    assert report.codes["-32602"] > 0 and report.codes["result"] > 0


async def test_a_lone_surrogate_in_an_id_a_method_or_a_cancelled_id_gets_one_answer(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path)) as server:
        await server.send_raw(b'{"jsonrpc":"2.0","id":"a\\ud800","method":"ping"}\n')
        await server.send_raw(
            b'{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"\\udc00"}}\n'
        )
        await server.send_raw(b'{"jsonrpc":"2.0","id":2,"method":"no\\ud800"}\n')
        first, second = await server.receive(), await server.receive()
        answers = sorted([first, second], key=lambda reply: str(reply["id"]))
        assert answers[0] == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {"code": -32601, "message": "method not found: no\\ud800"},
        }
        assert answers[1]["id"] == "a\ud800" and answers[1]["result"]["pong"] is True
        assert (await server.finish()) == (0, [])


def strictly_parsed(message: Any) -> Any:
    """`message` as a parser refusing unpaired surrogate escapes would read it (RFC 8259
    §8.2; serde_json, for one, refuses them): fails if a string in it holds one."""
    json.dumps(message, ensure_ascii=False).encode("utf-8")  # strict: a lone surrogate raises
    return message


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_an_error_message_quoting_a_lone_surrogate_shows_it_escaped_for_strict_parsers(
    tmp_path: Path, framing: FramingName
) -> None:
    async with running_server(*state_args(tmp_path), framing=framing) as server:
        await server.send_raw(frame(b'{"jsonrpc":"2.0","id":1,"method":"\\ud800x"}', framing))
        assert strictly_parsed(await server.receive()) == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32601, "message": "method not found: \\ud800x"},
        }
        await server.send_raw(
            frame(b'{"jsonrpc":"2.0","id":2,"method":"ping","\\udfff":0}', framing)
        )
        assert strictly_parsed(await server.receive()) == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {"code": -32600, "message": "invalid request: unknown members: \\udfff"},
        }
        assert (await server.finish()) == (0, [])
