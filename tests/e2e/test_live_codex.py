"""The real codex CLI (pinned, scripts/install-agents) as an interactive child of a real
server, against the loopback mock LLM (protocol.md §23): steered and queued messages,
an interrupt mid-tool whose command codex leaves running (the server ends it), and tool
approvals answered by a client or by the server's policy, all over JSON-RPC. The mock
ends a final text with each word after `REPEAT:` in the latest user message.
`running_server` proves no process of a run survives its test."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tests.backends.fixtures.record_codex_app import SHORT_SLEEP, WRITE_COMMAND
from tests.e2e.agents import CODEX_SPAWN, codex_environment, needs_cli, server_args
from tests.e2e.harness import running_server
from tests.e2e.live import (
    LiveClient,
    asked_both_ways,
    interrupted_mid_tool,
    tool_process,
)
from tests.mock_llm import (
    KEYWORD_ANSWER_NOW,
    KEYWORD_SLEEP_TOOL,
    TOOL_SAID,
    MockLLM,
)

pytestmark = needs_cli("codex")

SPAWN: Final = {**CODEX_SPAWN, "interactive": True, "stream": True}


async def test_messages_reach_codex_and_an_interrupt_ends_the_command_it_leaves_running(
    tmp_path: Path,
) -> None:
    # A plain prompt runs a short sleep (long enough to steer into); SLEEP-TOOL a long one.
    with MockLLM(tool_command=SHORT_SLEEP) as mock:
        env = codex_environment(tmp_path, mock.openai_base_url)
        async with running_server(*server_args(tmp_path), env=env) as server:
            client = LiveClient(server)
            run_id = (await client.result("spawn", {**SPAWN, "prompt": "wait a bit"}))["runId"]
            await tool_process(run_id, "sleep")
            queue = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:mango"}
            queued = await client.result("run/send", queue)
            assert queued["state"] == "queued"
            steer = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:kiwi"}
            assert (await client.result("run/send", {**steer, "delivery": "steer"}))[
                "state"
            ] == "delivered"
            assert (await client.answer(run_id)).endswith(" kiwi")  # steered into it
            await client.next(
                run_id, type="input", messageId=queued["messageId"], state="delivered"
            )
            assert (await client.answer(run_id)).endswith(" mango")
            # Interrupted once codex announced its command, codex leaves it running: the
            # server ends what the turn started, not codex.
            await interrupted_mid_tool(client, run_id, f"{KEYWORD_SLEEP_TOOL} now")
            after = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:cherry"}
            assert (await client.result("run/send", after))["state"] == "delivered"
            assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
            closed = await client.result("run/close", {"runId": run_id})
            child = closed["children"][0]
            assert (closed["status"], child["status"]) == ("completed", "completed"), closed
            assert child["output"]["text"].endswith(" cherry")
            assert child["resources"]["leftoversEnded"] >= 1, child
            await server.finish()


async def test_a_client_allows_and_declines_commands_and_the_policy_declines_one_unasked(
    tmp_path: Path,
) -> None:
    def environment(tmp_path: Path, mock: MockLLM) -> dict[str, str]:
        return codex_environment(tmp_path, mock.openai_base_url)

    seen = await asked_both_ways(tmp_path, environment, SPAWN)
    assert seen.asked["summary"] == f"/bin/bash -lc '{WRITE_COMMAND}'"
    assert TOOL_SAID in seen.after_rejected and "rejected by user" in seen.after_rejected
    # The command may write, so the server declines it (codex would run a command it
    # was allowed outside its read-only sandbox).
    assert seen.answered["optionId"] == "decline", seen
    assert TOOL_SAID in seen.after_policy and "rejected by user" in seen.after_policy
