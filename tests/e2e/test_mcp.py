"""`subagent-host mcp` driven by the official MCP SDK's own stdio client (protocol.md §22)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from subagent_host.client import Host
from subagent_host.mcp_face.arguments import SpawnArguments
from subagent_host.mcp_face.tools import REPLAY_ONLY
from subagent_host.openrpc.schemas import Direction, standalone_schema
from subagent_host.rpc.wire import RunSnapshot
from tests.e2e.agents import AGENT_BIN, PI_SPAWN, pi_environment
from tests.e2e.harness import EXIT_TIMEOUT_S, assert_no_run_survives, server_executable
from tests.e2e.mcp_client import (
    SESSION,
    McpServer,
    assert_gone,
    mcp_arguments,
    mcp_server,
    text_of,
)
from tests.mock_llm import KEYWORD_ANSWER_NOW, MockLLM

pytestmark = pytest.mark.e2e


async def test_an_mcp_client_lists_eight_tools_whose_schemas_are_the_wire_types(
    tmp_path: Path,
) -> None:
    async with mcp_server(tmp_path) as server:
        tools = {tool.name: tool for tool in (await server.session.list_tools()).tools}
    assert list(tools) == [
        "spawn",
        "wait",
        "status",
        "stop",
        "send",
        "interrupt",
        "close",
        "agents_list",
    ]
    spawn = tools["spawn"].input_schema
    expected = standalone_schema([SpawnArguments], Direction.PARAMS, leave_out=("mode", "stream"))
    expected["properties"]["waitSeconds"].update(minimum=0, maximum=50)
    # The backend is one of the server's: their names are listed.
    names = ["claude", "codex", "command", "pi"]
    expected["properties"]["backend"].update(
        examples=names,
        description="one of this server's backends: `claude`, `codex`, `command`, `pi`; "
        "absent: chosen as protocol.md §8.1 says.",
    )
    assert spawn == expected
    assert {"prompt", "agent", "command", "tasks", "chain", "workflow", "cwd"} <= set(
        spawn["properties"]
    )
    assert "mode" not in spawn["properties"] and "stream" not in spawn["properties"]
    assert tools["spawn"].output_schema == standalone_schema(
        [RunSnapshot], Direction.RESULT, leave_out=REPLAY_ONLY
    )
    assert tools["wait"].input_schema["required"] == ["runId"]
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.output_schema is not None
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)


async def test_spawn_wait_status_and_stop_run_through_the_face_and_leave_nothing_behind(
    tmp_path: Path,
) -> None:
    async with mcp_server(tmp_path) as server:
        done = await server.call(
            "spawn", {"command": ["sh", "-c", "echo delegated"], "waitSeconds": 20}
        )
        assert not done.is_error
        assert done.structured_content is not None
        assert done.structured_content["status"] == "completed"
        assert done.structured_content["output"]["text"] == "delegated\n"
        assert "completed" in text_of(done)
        assert "delegated" in text_of(done)

        started = await server.ok("spawn", {"command": ["sleep", "300"], "label": "long"})
        assert started["status"] in ("queued", "running")
        run_id = started["runId"]
        waited = await server.call("wait", {"runId": run_id, "waitSeconds": 1})
        assert waited.structured_content is not None
        assert waited.structured_content["status"] == "running"
        assert f"still going: call wait with runId {run_id}" in text_of(waited)
        listing = await server.ok("status", {})
        assert [run["runId"] for run in listing["runs"]] == [
            run_id,
            done.structured_content["runId"],
        ]
        one = await server.ok("status", {"runId": run_id[:8]})
        assert one["runId"] == run_id and one["status"] == "running"
        stopped = await server.ok("stop", {"runId": run_id})
        assert stopped["status"] == "cancelled"
        assert (await server.ok("wait", {"runId": run_id}))["status"] == "cancelled"
        agents = await server.ok("agents_list", {})
        assert agents["agents"] == []


async def test_what_the_protocol_refuses_is_a_tool_error_in_its_words(tmp_path: Path) -> None:
    async with mcp_server(tmp_path) as server:
        too_long = await server.call("wait", {"runId": "whatever-run", "waitSeconds": 51})
        assert too_long.is_error
        assert "waitSeconds: 51 is out of range (0..50)" in text_of(too_long)
        not_offered = await server.call("spawn", {"command": ["true"], "mode": "task"})
        assert not_offered.is_error and "mode: unknown field" in text_of(not_offered)
        unknown = await server.call("status", {"runId": "no-such-run"})
        assert unknown.is_error and "error -32001" in text_of(unknown)
        rejected = await server.call("spawn", {"command": ["true"], "cwd": str(tmp_path / "no")})
        assert rejected.is_error
        assert "error -32003" in text_of(rejected)
        assert "invalid-cwd at cwd" in text_of(rejected)
        assert server.run_ids == set()  # nothing was started


async def test_progress_is_sent_at_the_start_on_each_change_and_at_least_every_5_s(
    tmp_path: Path,
) -> None:
    seen: list[tuple[float, float, str | None]] = []

    async def noted(progress: float, total: float | None, message: str | None) -> None:
        seen.append((time.monotonic(), progress, message))

    async with mcp_server(tmp_path) as server:
        done = await server.ok(
            "spawn",
            {"command": ["sleep", "9"], "waitSeconds": 30},
            noted,
        )
        ended = time.monotonic()
    assert done["status"] == "completed"
    messages = [message or "" for _at, _value, message in seen]
    assert "waiting up to 30 s" in messages[0]
    assert any("still going" in message for message in messages)
    assert messages[-1].endswith(": completed")
    assert [value for _at, value, _message in seen] == list(range(1, len(seen) + 1))
    moments = [*(at for at, _value, _message in seen), ended]
    assert max(later - earlier for earlier, later in itertools.pairwise(moments)) <= 5.0


async def test_a_cancelled_wait_ends_the_call_and_leaves_the_run_running(tmp_path: Path) -> None:
    async with mcp_server(tmp_path) as server:
        run_id = (await server.ok("spawn", {"command": ["sleep", "300"]}))["runId"]
        heard = anyio.Event()

        async def noted(progress: float, total: float | None, message: str | None) -> None:
            heard.set()

        async with anyio.create_task_group() as group:

            async def waiting() -> None:
                await server.call("wait", {"runId": run_id, "waitSeconds": 50}, noted)

            group.start_soon(waiting)
            with anyio.fail_after(EXIT_TIMEOUT_S):
                await heard.wait()  # the server is waiting now
            group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        assert (await server.ok("status", {"runId": run_id}))["status"] == "running"
        assert (await server.ok("stop", {"runId": run_id}))["status"] == "cancelled"


async def test_the_end_of_the_client_s_input_stops_every_run_it_started(tmp_path: Path) -> None:
    async with mcp_server(tmp_path) as server:
        run_id = (await server.ok("spawn", {"command": ["sleep", "300"]}))["runId"]
        assert (await server.ok("status", {"runId": run_id}))["status"] == "running"
    # The client has closed our stdin: the face and its serve child are gone, the `sleep`
    # too (checked on the way out), and the run is recorded as the client's going.
    async with Host.start(["--state-dir", str(tmp_path / "state"), "--session", SESSION]) as host:
        final = await host.status(run_id)
    assert final.status == "cancelled" and final.reason == "client-disconnected"


async def test_a_killed_face_still_stops_its_runs(tmp_path: Path) -> None:
    parameters = StdioServerParameters(command=server_executable(), args=mcp_arguments(tmp_path))
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_client(parameters, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await asyncio.wait_for(session.initialize(), EXIT_TIMEOUT_S)
                server = McpServer(session, tmp_path / "stderr.log")
                run_id = (await server.ok("spawn", {"command": ["sleep", "300"]}))["runId"]
                os.kill(server.face.pid, signal.SIGKILL)  # by pid: the face this test started
                await assert_gone(server.face, server.serve)
    assert_no_run_survives({run_id})


async def test_an_unknown_tool_and_a_dead_server_are_mcp_errors(tmp_path: Path) -> None:
    async with mcp_server(tmp_path) as server:
        with pytest.raises(MCPError) as unknown:
            await server.call("launch", {})
        assert unknown.value.error.code == INVALID_PARAMS
        server.serve.kill()  # by pid: the serve child this test's face started
        await assert_gone(server.serve)
        with pytest.raises(MCPError) as gone:
            await server.call("status", {})
        assert gone.value.error.code == INTERNAL_ERROR
        assert "the subagent-host server is gone" in gone.value.error.message


async def test_a_server_that_cannot_start_ends_the_face_with_one_line(tmp_path: Path) -> None:
    # /proc/version cannot be opened for writing: the serve child exits 2 at start.
    face = await asyncio.create_subprocess_exec(
        server_executable(),
        *mcp_arguments(tmp_path, "--log-file", "/proc/version"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(face.communicate(), EXIT_TIMEOUT_S)
    assert face.returncode == 1
    assert out == b""
    assert err.decode().splitlines()[-1] == (
        "subagent-host mcp: the server could not start (exit status 2)"
    )


async def test_a_face_at_the_maximum_depth_refuses_every_spawn(tmp_path: Path) -> None:
    async with mcp_server(tmp_path, env={"SUBAGENT_HOST_DEPTH": "1"}) as server:
        refused = await server.call("spawn", {"command": ["true"]})
        assert refused.is_error
        assert "error -32003" in text_of(refused) and "max-depth" in text_of(refused)


async def test_the_end_of_input_during_a_waiting_call_stops_the_run_at_once(tmp_path: Path) -> None:
    face = await asyncio.create_subprocess_exec(
        server_executable(),
        *mcp_arguments(tmp_path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert face.stdin is not None and face.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert face.stdin is not None
        face.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    client = {"name": "test", "version": "1"}
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
    send({"id": 1, "method": "initialize", "params": hello})
    await asyncio.wait_for(face.stdout.readline(), EXIT_TIMEOUT_S)
    send({"method": "notifications/initialized"})
    spawn = {"command": ["sleep", "300"], "waitSeconds": 50}
    token = {"progressToken": "p"}
    send(
        {
            "id": 2,
            "method": "tools/call",
            "params": {"name": "spawn", "arguments": spawn, "_meta": token},
        }
    )
    progress = json.loads(await asyncio.wait_for(face.stdout.readline(), EXIT_TIMEOUT_S))
    assert progress["method"] == "notifications/progress"  # the run is running: the wait began
    run_id = progress["params"]["message"].split()[1].rstrip(":")
    face.stdin.close()
    rest, err = await asyncio.wait_for(face.communicate(), EXIT_TIMEOUT_S)
    assert face.returncode == 0, err.decode()
    assert "Traceback" not in err.decode()
    assert [json.loads(line)["id"] for line in rest.splitlines()] == [2]  # "connection closed"
    async with Host.start(["--state-dir", str(tmp_path / "state"), "--session", SESSION]) as host:
        final = await host.status(run_id)
    assert final.status == "cancelled" and final.reason == "client-disconnected"
    assert_no_run_survives({run_id})


@pytest.mark.skipif(not (AGENT_BIN / "pi").exists(), reason="pi is not installed")
async def test_a_face_whose_server_requires_egress_consent_runs_an_agent_only_with_it(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    spawn = {**PI_SPAWN, "prompt": f"{KEYWORD_ANSWER_NOW} hi", "waitSeconds": 40}
    async with mcp_server(tmp_path, "--require-egress-consent", env=env) as server:
        refused = await server.call("spawn", spawn)
        assert refused.is_error
        assert "error -32003" in text_of(refused) and "egress-consent-required" in text_of(refused)
        assert mock.requests == []
        done = await server.ok("spawn", {**spawn, "egressConsent": True})
        assert (done["status"], done["egressConsent"]) == ("completed", True)


async def test_a_face_whose_server_requires_preflight_refuses_every_spawn(tmp_path: Path) -> None:
    async with mcp_server(tmp_path, "--require-preflight") as server:
        refused = await server.call("spawn", {"command": ["true"]})
        assert refused.is_error
        assert "error -32003" in text_of(refused) and "preflight-required" in text_of(refused)
