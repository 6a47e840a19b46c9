"""`ping` over real stdio in both framings, and through pygls's own JSON-RPC client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pygls.client import JsonRPCClient

from subagent_host import __version__
from subagent_host.backends import cgroups
from tests.e2e.harness import EXIT_TIMEOUT_S, FramingName, running_server, server_executable
from tests.e2e.test_leftovers import started

FRAMINGS: list[FramingName] = ["ndjson", "lsp"]

LIMITS = {
    "maxConcurrency": 4,
    "maxParallel": 8,
    "graceMs": 5000,
    "defaultTimeoutMs": 1_200_000,
    "defaultStallTimeoutMs": 240_000,
    "outputCapBytes": 49_152,
    "outputCapLines": 600,
    "previousCapBytes": 65_536,
    "maxMessageBytes": 16_777_216,
    "maxQueue": 1000,
    "workflowParallelism": 4,
    "maxDepth": 1,
}


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_ping_answers_the_contract_shape(framing: FramingName) -> None:
    async with running_server("--session", "editor-1", framing=framing) as server:
        reply = await server.request("ping", msg_id=1)
        # Agent backends are available only where their CLI is on the server's PATH.
        backends = {entry["id"]: entry for entry in reply["result"].pop("backends")}
        assert backends.pop("command") == {"id": "command", "available": True}
        assert "pi" in backends
        assert reply["result"].pop("processTracking") in ("cgroup", "subreaper", "marker")
        assert all(isinstance(entry["available"], bool) for entry in backends.values())
        assert reply == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "pong": True,
                "server": {"name": "subagent-host", "version": __version__},
                "protocolVersion": "1",
                "sessionId": "editor-1",
                "methods": [
                    "agents/list",
                    "initialize",
                    "ping",
                    "preflight",
                    "resume",
                    "run/close",
                    "run/interrupt",
                    "run/permit",
                    "run/send",
                    "shutdown",
                    "spawn",
                    "status",
                    "stop",
                ],
                "limits": LIMITS,
                "persistence": "sqlite",
                "admission": {"requirePreflight": False, "requireEgressConsent": False},
            },
        }
        assert await server.finish() == (0, [])


async def test_ping_without_a_session_gets_a_fresh_one_that_stays_for_the_connection() -> None:
    async with running_server() as first, running_server() as second:
        a1 = (await first.request("ping"))["result"]["sessionId"]
        a2 = (await first.request("ping", {}))["result"]["sessionId"]
        b = (await second.request("ping"))["result"]["sessionId"]
        assert a1 == a2 and a1 != b and a1.startswith("session-")
        await first.finish()
        await second.finish()


async def test_ping_with_a_session_id_binds_the_connection() -> None:
    async with running_server() as server:
        bound = await server.request("ping", {"sessionId": "team.alpha:42"})
        assert bound["result"]["sessionId"] == "team.alpha:42"
        again = await server.request("ping")
        assert again["result"]["sessionId"] == "team.alpha:42"
        await server.finish()


async def test_ping_limits_follow_the_command_line() -> None:
    args = ("--max-concurrency", "2", "--grace-ms", "750", "--max-message-bytes", "65536")
    async with running_server(*args, "--max-queue", "3") as server:
        limits = (await server.request("ping"))["result"]["limits"]
        assert limits == {
            **LIMITS,
            "maxConcurrency": 2,
            "graceMs": 750,
            "maxMessageBytes": 65536,
            "maxQueue": 3,
        }
        await server.finish()


async def test_pygls_json_rpc_client_can_ping_and_cancel_over_content_length() -> None:
    client = JsonRPCClient()
    await client.start_io(server_executable())
    server = client._server
    assert server is not None and server.stderr is not None
    stderr = asyncio.create_task(server.stderr.read())  # read it, or a chatty server blocks
    try:
        result = await asyncio.wait_for(
            client.protocol.send_request_async("ping", {"sessionId": "pygls"}), EXIT_TIMEOUT_S
        )
        assert result.pong is True and result.sessionId == "pygls"
        client.protocol.notify("$/cancelRequest", {"id": 12345})  # unknown: ignored
        with pytest.raises(Exception, match="method not found: agents/lost"):
            await asyncio.wait_for(
                client.protocol.send_request_async("agents/lost", {}), EXIT_TIMEOUT_S
            )
    finally:
        assert server.stdin is not None
        server.stdin.close()
        assert await asyncio.wait_for(server.wait(), EXIT_TIMEOUT_S) == 0
        await client.stop()
        assert b"Traceback" not in await stderr


@pytest.mark.parametrize("mode", ["cgroup", "subreaper", "marker"])
async def test_ping_reports_the_process_tracking_the_option_forces(mode: str) -> None:
    if mode == "cgroup" and cgroups.find_hierarchy() is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    async with running_server("--process-tracking", mode) as server:
        assert (await server.request("ping"))["result"]["processTracking"] == mode
        assert (await server.finish())[0] == 0


async def test_ping_reports_the_process_tracking_a_configuration_file_forces(
    tmp_path: Path,
) -> None:
    config = tmp_path / "subagents.json"
    config.write_text('{"process_tracking": "marker"}')
    async with running_server("--config", str(config)) as server:
        assert (await server.request("ping"))["result"]["processTracking"] == "marker"
        assert (await server.finish())[0] == 0


async def test_ping_reports_the_tracking_a_server_falls_back_to_when_it_cannot_make_a_cgroup() -> (
    None
):
    """Its instance cgroup removed behind its back, the server starts children without
    cgroups from then on, and says so."""
    hierarchy = cgroups.find_hierarchy()
    if hierarchy is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    async with running_server("--process-tracking", "cgroup") as server:
        assert (await server.request("ping"))["result"]["processTracking"] == "cgroup"
        ticks = cgroups.start_ticks(server.proc.pid)
        assert ticks is not None
        (hierarchy.root / cgroups.instance_name(server.proc.pid, ticks)).rmdir()
        _, (pid,) = await started(server, ["sh", "-c", "echo $$"])
        assert (await server.request("ping"))["result"]["processTracking"] == "subreaper"
        assert (await server.finish())[0] == 0
