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
from tests.backends.fixtures.record_claude_stream import WRITE_COMMAND
from tests.e2e.agents import CLAUDE_SPAWN, claude_environment, needs_cli, server_args
from tests.e2e.harness import running_server
from tests.e2e.live import (
    REMEMBERED,
    LiveClient,
    asked_both_ways,
    gone,
    resumed,
    tool_process,
)
from tests.mock_llm import (
    KEYWORD_ANSWER_NOW,
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
        # Closed after an interrupted turn, Claude Code exits 1: the close still ends the
        # child `completed`.
        run_id = (await client.result("spawn", spawn))["runId"]
        sleep = await tool_process(run_id, "sleep")
        assert (await client.result("run/interrupt", {"runId": run_id}))["interrupted"]
        assert (await client.turn_ended(run_id))["stopReason"] == "interrupted"
        closed = await client.result("run/close", {"runId": run_id})
        child = closed["children"][0]
        assert (closed["status"], child["status"], child["exitCode"]) == (
            "completed",
            "completed",
            1,
        )
        assert await gone(sleep)
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
        run_id = (await client.result("spawn", {**SPAWN, "prompt": REMEMBERED}))["runId"]
        await client.turn_ended(run_id)
        assert (await client.result("run/close", {"runId": run_id}))["status"] == "completed"
        await resumed(client, run_id, mock)
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
    def environment(tmp_path: Path, mock: MockLLM) -> dict[str, str]:
        return claude_environment(tmp_path, mock.base_url)

    seen = await asked_both_ways(tmp_path, environment, SPAWN)
    assert (seen.asked["name"], seen.asked["summary"]) == ("Bash", WRITE_COMMAND)
    assert seen.after_rejected.endswith(f"{TOOL_SAID}{REFUSED}"), seen
    # Bash is kept under read access: the server rejects each write it asks for.
    assert seen.answered["optionId"] == "reject-once", seen
    assert seen.after_policy.endswith(f"{TOOL_SAID}{REFUSED}"), seen
