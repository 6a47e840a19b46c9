"""`initialize` and `_meta` over real stdio: the optional handshake and forward compatibility."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagent_host import __version__
from subagent_host.backends.tested_versions import TESTED_VERSIONS
from tests.e2e.harness import (
    FramingName,
    error_of,
    reply_to,
    result_of,
    running_server,
    state_args,
)

FRAMINGS: list[FramingName] = ["ndjson", "lsp"]


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_initialize_reports_everything_ping_does_and_more(
    framing: FramingName, tmp_path: Path
) -> None:
    async with running_server(*state_args(tmp_path, "editor-1"), framing=framing) as server:
        reply = await server.request(
            "initialize",
            {
                "protocolVersion": "1",
                "clientInfo": {"name": "test-client", "version": "9.9"},
                "capabilities": {},
            },
            msg_id=1,
        )
        ping = (await server.request("ping"))["result"]
        result = reply["result"]
        capabilities = result.pop("capabilities")
        assert result == {
            "protocolVersion": "1",
            "serverInfo": {"name": "subagent-host", "version": __version__},
            "sessionId": "editor-1",
        }
        assert capabilities.keys() == {"methods", "notifications", "backends", "limits", "features"}
        assert capabilities["methods"] == ping["methods"]
        assert "initialize" in capabilities["methods"]
        assert capabilities["notifications"] == {
            "sent": ["$/progress", "run/event"],
            "accepted": [
                "$/cancelRequest",
                "exit",
                "initialized",
                "run/detach",
                "window/workDoneProgress/cancel",
            ],
        }
        assert capabilities["limits"] == ping["limits"]
        assert {"maxQueue", "workflowParallelism", "maxDepth"} <= capabilities["limits"].keys()
        backends = {entry["id"]: entry for entry in capabilities["backends"]}
        assert backends["command"] == {"id": "command", "available": True}
        for name, tested in TESTED_VERSIONS.items():
            assert backends[name]["testedVersion"] == tested
        assert capabilities["features"] == {
            "preflight": True,
            "resume": True,
            "workflows": True,
            "agents": True,
            "workDoneProgress": True,
            "batches": True,
            "processTracking": ping["processTracking"],
            "persistence": "sqlite",
            "requirePreflight": False,
            "requireEgressConsent": False,
            "framing": framing,
        }
        await server.finish()


async def test_initialize_is_optional_repeatable_and_never_refuses_another_version(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path), "--require-preflight") as server:
        # Every method works before it.
        assert (await result_of(server, "status", {}))["runs"] == []
        first = await result_of(server, "initialize", {"protocolVersion": "2025-06-18"})
        assert first["protocolVersion"] == "1"
        again = await result_of(server, "initialize", {})
        assert again == first
        assert again["capabilities"]["features"]["requirePreflight"] is True
        # Without params at all, too.
        assert (await server.request("initialize"))["result"] == first
        await server.finish()


async def test_initialize_params_are_checked_like_any_others(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path)) as server:
        error = await error_of(server, "initialize", {"clientInfo": {"version": "1"}})
        assert error["code"] == -32602
        assert error["data"]["errors"] == [
            {"path": "clientInfo.name", "message": "required field missing"}
        ]
        error = await error_of(server, "initialize", {"protocolVersions": ["1"]})
        assert error["data"]["errors"] == [
            {"path": "protocolVersions", "message": "unknown field (did you mean protocolVersion?)"}
        ]
        await server.finish()


META = {"traceId": "abc", "nested": {"anything": [1, 2]}}


async def test_every_method_accepts_a_meta_object_and_ignores_it(tmp_path: Path) -> None:
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("initialize", {}, "result"),
        ("ping", {}, "result"),
        ("agents/list", {}, "result"),
        ("status", {}, "result"),
        ("preflight", {"command": ["true"]}, "result"),
        ("spawn", {"command": ["echo", "hi"], "mode": "task"}, "result"),
        ("stop", {"runId": "0123456789abcdef"}, "error"),  # -32001, not -32602
        ("resume", {"token": "not-a-token"}, "error"),  # -32004, not -32602
    ]
    async with running_server(*state_args(tmp_path)) as server:
        for method, params, outcome in calls:
            plain = await reply_to(server, method, params)
            with_meta = await reply_to(server, method, {**params, "_meta": META})
            assert outcome in with_meta, (method, with_meta)
            if outcome == "error":
                assert with_meta["error"]["code"] == plain["error"]["code"] != -32602
        await server.finish()


async def test_a_meta_that_is_not_an_object_is_refused_as_invalid_params(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path)) as server:
        for method in ("ping", "initialize", "status"):
            error = await error_of(server, method, {"_meta": "x"})
            assert error["code"] == -32602
            assert error["data"]["errors"] == [
                {"path": "_meta", "message": "expected an object, got a string"}
            ]
        await server.finish()
