"""The real Claude Code CLI (pinned, scripts/install-agents) as an interactive child of a
real server, against the loopback mock LLM (protocol.md §23): live messages, an
interrupt mid-tool, a stop, a resume, and tool approvals answered by a client or by the
server's policy, all over JSON-RPC. Claude Code tells the model a steered message as a
note of its own, so the mock's requests show that it got there. `running_server`
proves no process of a run survives its test."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from subagent_host.backends.interactive.claude_stream import REJECTED_MESSAGE
from tests.backends.fixtures.record_claude_stream import WRITE_COMMAND, WRITTEN
from tests.e2e.agents import CLAUDE_SPAWN, claude_environment, needs_cli, server_args
from tests.e2e.harness import running_server
from tests.e2e.live import LiveClient, gone, option_of, tool_process
from tests.mock_llm import (
    KEYWORD_ANSWER_NOW,
    KEYWORD_REPORT_TOOL,
    KEYWORD_SLEEP_TOOL,
    TOOL_SAID,
    MockLLM,
)

pytestmark = needs_cli("claude")

SPAWN: Final = {**CLAUDE_SPAWN, "interactive": True, "stream": True}
REFUSED: Final = REJECTED_MESSAGE
"""What Claude Code's model is told of a tool use that was rejected (the driver's words)."""


async def test_messages_reach_claude_an_interrupt_ends_its_tool_and_a_stop_ends_it(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = claude_environment(tmp_path, mock.base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        client = LiveClient(server)
        spawn = {**SPAWN, "prompt": f"{KEYWORD_SLEEP_TOOL} please"}
        run_id = (await client.result("spawn", spawn))["runId"]
        sleep = await tool_process(run_id, "sleep")
        steer = {"runId": run_id, "text": "REPEAT:steered", "delivery": "steer"}
        assert (await client.result("run/send", steer))["state"] == "delivered"
        queue = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:queued"}
        queued = await client.result("run/send", queue)
        assert queued["state"] == "queued"
        status = await client.result("status", {"runId": run_id})
        assert status["children"][0]["turn"] == {"count": 1, "state": "running"}
        interrupted = await client.result("run/interrupt", {"runId": run_id})
        assert interrupted["interrupted"] is True
        assert (await client.turn_ended(run_id))["stopReason"] == "interrupted"
        assert await gone(sleep)  # Claude Code ended its tool's command
        await client.next(run_id, type="input", messageId=queued["messageId"], state="delivered")
        assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
        assert mock.requests_containing("REPEAT:steered"), "the model got the steered message"
        closed = await client.result("run/close", {"runId": run_id})
        child = closed["children"][0]
        assert (closed["status"], child["status"]) == ("completed", "completed"), closed
        assert child["output"]["text"].endswith(" queued")
        # Stopped mid-tool, an interactive child ends like any other, with its tool.
        run_id = (await client.result("spawn", spawn))["runId"]
        sleep = await tool_process(run_id, "sleep")
        stopped = await client.result("stop", {"runId": run_id, "graceMs": 2000})
        assert stopped["status"] == "cancelled", stopped
        assert await gone(sleep)
        await server.finish()


async def test_a_resumed_claude_child_is_interactive_again_and_remembers(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = claude_environment(tmp_path, mock.base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        client = LiveClient(server)
        first = {**SPAWN, "prompt": f"{KEYWORD_ANSWER_NOW} remember PAPAYA7"}
        run_id = (await client.result("spawn", first))["runId"]
        await client.turn_ended(run_id)
        assert (await client.result("run/close", {"runId": run_id}))["status"] == "completed"
        resume = {"runId": run_id, "message": f"{KEYWORD_ANSWER_NOW} REPEAT:second"}
        token = (await client.result("preflight", {"resume": resume}))["token"]
        await client.result("resume", {"token": token})
        assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
        (request,) = mock.requests_containing("REPEAT:second")
        assert "remember PAPAYA7" in request.raw_body  # the first attempt's message
        said = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:third"}
        assert (await client.result("run/send", said))["state"] == "delivered"
        assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
        closed = await client.result("run/close", {"runId": run_id})
        child: dict[str, Any] = closed["children"][0]
        assert (child["attempt"], child["status"]) == (2, "completed"), closed
        assert child["turn"] == {"count": 2, "state": "waiting"}
        assert child["output"]["text"].endswith(" third")
        await server.finish()


async def test_a_client_allows_and_rejects_writes_and_the_policy_rejects_one_unasked(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        env = claude_environment(tmp_path, mock.base_url)
        async with running_server(*server_args(tmp_path), env=env) as server:
            client = LiveClient(server)
            asking = {**SPAWN, "cwd": str(work), "approvals": "client"}
            spawn = {**asking, "prompt": f"{KEYWORD_REPORT_TOOL} write it"}
            run_id = (await client.result("spawn", spawn))["runId"]
            asked = await client.next(run_id, type="permission", stage="asked")
            assert (asked["name"], asked["summary"]) == ("Bash", WRITE_COMMAND)
            status = await client.result("status", {"runId": run_id})
            assert [p["permissionId"] for p in status["pendingPermissions"]] == [
                asked["permissionId"]
            ]
            assert not (work / WRITTEN).exists()  # it waits for the answer
            permit = {"runId": run_id, "permissionId": asked["permissionId"]}
            allowed = await client.result(
                "run/permit", {**permit, "optionId": option_of(asked, "allow-once")}
            )
            assert allowed["kind"] == "allow-once"
            assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
            assert (work / WRITTEN).exists()
            (work / WRITTEN).unlink()
            again = {"runId": run_id, "text": f"{KEYWORD_REPORT_TOOL} write it again"}
            assert (await client.result("run/send", again))["state"] == "delivered"
            asked = await client.next(run_id, type="permission", stage="asked")
            permit = {"runId": run_id, "permissionId": asked["permissionId"]}
            await client.result(
                "run/permit", {**permit, "optionId": option_of(asked, "reject-once")}
            )
            assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
            assert not (work / WRITTEN).exists()
            closed = await client.result("run/close", {"runId": run_id})
            assert "pendingPermissions" not in closed
            assert closed["children"][0]["output"]["text"].endswith(f"{TOOL_SAID}{REFUSED}")
            # The server answers from the child's access: a write is rejected, unasked.
            policy = {**spawn, "approvals": "policy", "access": {"filesystem": "read"}}
            run_id = (await client.result("spawn", policy))["runId"]
            answered = await client.next(run_id, type="permission", stage="answered")
            assert (answered["answeredBy"], answered["optionId"]) == ("policy", "reject-once")
            assert not client.of(run_id, "permission", stage="asked")[0].get("optionId")
            assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
            status = await client.result("status", {"runId": run_id})
            assert "pendingPermissions" not in status
            assert not (work / WRITTEN).exists()
            closed = await client.result("run/close", {"runId": run_id})
            assert closed["children"][0]["output"]["text"].endswith(f"{TOOL_SAID}{REFUSED}")
            await server.finish()
