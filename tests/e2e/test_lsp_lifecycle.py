"""An LSP client's own handshake and ending over real stdio, and `"params": []`.

vscode-languageclient sends `initialize` with LSP's fields, then `initialized`,
and ends with `shutdown` and `exit`, leaving stdin open: the server exits on
`exit` alone, with status 0 after `shutdown` and 1 without, having ended its
background runs as at end of input. @open-rpc/client-js sends `"params": []`
for every call without params.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    FramingName,
    ServerProcess,
    reply_to,
    result_of,
    running_server,
    state_args,
)
from tests.handlers.test_lifecycle import VSCODE_INITIALIZE

FRAMINGS: list[FramingName] = ["ndjson", "lsp"]
SHUT_DOWN = {
    "code": -32600,
    "message": "invalid request: the server is shut down: "
    "after shutdown, only the exit notification is taken",
}


async def notify(server: ServerProcess, method: str, params: Any = None) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    await server.send(message)


LIFECYCLE_WORDS = ("notification", "initialized", "exit", "shutdown")


def lifecycle_warnings(server: ServerProcess) -> list[str]:
    """Warning lines about LSP's lifecycle messages (before, `initialized` and `exit` were
    "ignoring notification for unknown method"). Not every warning: a server starting
    while another one's processes are left over says so, whatever test left them."""
    lines = server.stderr_text.splitlines()
    said = [line.split("WARNING", 1)[1] for line in lines if "WARNING" in line]
    return [text for text in said if any(word in text for word in LIFECYCLE_WORDS)]


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_vscode_languageclients_handshake_and_ending_exit_0_in_silence(
    framing: FramingName, tmp_path: Path
) -> None:
    args = state_args(tmp_path, "s1", "--log-level", "info")
    async with running_server(*args, framing=framing) as server:
        reply = await server.request("initialize", VSCODE_INITIALIZE, msg_id=0)
        result = reply["result"]
        assert result["protocolVersion"] == "1"
        assert result["capabilities"]["features"]["framing"] == framing
        assert "shutdown" in result["capabilities"]["methods"]
        assert {"initialized", "exit"} <= set(result["capabilities"]["notifications"]["accepted"])
        await notify(server, "initialized", {})
        assert (await server.request("ping", msg_id=1))["result"]["pong"] is True
        assert await server.request("shutdown", msg_id=2) == {
            "jsonrpc": "2.0",
            "id": 2,
            "result": None,
        }
        await notify(server, "exit")
        assert await server.until_exit() == (0, [])
    # Its whole log, read to its end: INFO lines, not one of them about `initialized`.
    assert lifecycle_warnings(server) == []
    assert "initialized" not in server.stderr_text
    assert "ignoring notification" not in server.stderr_text
    assert "client: Visual Studio Code 1.95.0 (process 1234)" in server.stderr_text
    assert "the client sent exit: ending as at end of input" in server.stderr_text


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_exit_without_shutdown_ends_the_server_with_status_1(
    framing: FramingName, tmp_path: Path
) -> None:
    async with running_server(*state_args(tmp_path), framing=framing) as server:
        await result_of(server, "initialize", VSCODE_INITIALIZE)
        await notify(server, "initialized", {})
        await notify(server, "exit")
        assert await server.until_exit() == (1, [])
    assert lifecycle_warnings(server) == [] and "Traceback" not in server.stderr_text


async def test_after_shutdown_requests_are_invalid_request_and_a_second_shutdown_too(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path)) as server:
        assert (await server.request("shutdown", []))["result"] is None
        assert (await server.request("ping"))["error"] == SHUT_DOWN
        assert (await server.request("shutdown"))["error"] == SHUT_DOWN
        assert (await server.request("spawn", {"command": ["true"]}))["error"] == SHUT_DOWN
        await notify(server, "initialized", {})  # ignored, as every notification but exit
        await notify(server, "exit", [])
        assert await server.until_exit() == (0, [])
    assert lifecycle_warnings(server) == []


async def test_a_task_spawn_read_before_shutdown_is_answered_before_exit_ends_the_server(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path)) as server:
        task = {"command": ["sh", "-c", "sleep 0.5; echo done"], "mode": "task"}
        await server.send({"jsonrpc": "2.0", "id": "task", "method": "spawn", "params": task})
        await server.send({"jsonrpc": "2.0", "id": "down", "method": "shutdown"})
        await notify(server, "exit")
        code, messages = await server.until_exit()
        assert code == 0
        replies = {m["id"]: m for m in messages if "id" in m}
        assert replies["down"]["result"] is None
        assert replies["task"]["result"]["status"] == "completed"
        assert replies["task"]["result"]["output"]["text"] == "done\n"


async def test_exit_stops_a_background_run_as_the_end_of_input_does(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path), framing="lsp") as server:
        await result_of(server, "initialize", VSCODE_INITIALIZE)
        await notify(server, "initialized", {})
        run = await result_of(server, "spawn", {"command": ["sleep", "60"]})
        async with asyncio.timeout(EXIT_TIMEOUT_S):  # its child is running
            while True:
                message = await server.receive()
                params = message.get("params", {})
                if params.get("type") == "child" and params.get("status") == "running":
                    break
        assert (await server.request("shutdown"))["result"] is None
        await notify(server, "exit")
        code, messages = await server.until_exit()
        assert code == 0
        statuses = [
            m["params"]["status"]
            for m in messages
            if m.get("method") == "run/event" and m["params"]["type"] == "status"
        ]
        assert statuses[-1] == "cancelled"
    said = [line for line in server.stderr_text.splitlines() if "cancelling" in line]
    assert len(said) == 1 and "1 background run" in said[0], server.stderr_text
    # What it recorded, read by the next server on the same state directory.
    async with running_server(*state_args(tmp_path)) as server:
        snapshot = await result_of(server, "status", {"runId": run["runId"]})
        assert (snapshot["status"], snapshot["reason"]) == ("cancelled", "client-disconnected")
        await server.finish()


async def test_an_empty_params_array_is_the_same_as_no_params_for_every_method(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path)) as server:
        methods = (await server.request("ping"))["result"]["methods"]
        assert "shutdown" in methods
        for method in [name for name in methods if name != "shutdown"]:
            without = await server.request(method, msg_id=f"{method}-without")
            empty = await server.request(method, [], msg_id=f"{method}-empty")
            assert ("error" in without) == ("error" in empty), (method, without, empty)
            if "error" in without:
                assert empty["error"] == without["error"], method
            else:
                assert empty["result"].keys() == without["result"].keys(), method
        assert (await server.request("shutdown", []))["result"] is None
        await notify(server, "exit", [])
        assert (await server.until_exit())[0] == 0


@pytest.mark.parametrize("params", [[None], [{}], ["r-1"], [{"runId": "r-1"}]])
async def test_a_non_empty_params_array_is_invalid_params_that_says_params_once(
    tmp_path: Path, params: list[Any]
) -> None:
    async with running_server(*state_args(tmp_path)) as server:
        for method in ("ping", "status", "shutdown"):
            error = (await reply_to(server, method, params))["error"]
            assert error["code"] == -32602
            assert error["message"].count("params") == 1, error["message"]
            assert error["data"]["errors"] == [
                {
                    "path": "",
                    "message": "expected an object (this server takes them by name, "
                    "not by position), got an array",
                }
            ]
        # The refused `shutdown` shut nothing down.
        assert (await server.request("ping"))["result"]["pong"] is True
        assert (await server.finish())[0] == 0
