"""The real pi CLI (pinned, scripts/install-agents) as an interactive child of a real
server, against the loopback mock LLM (protocol.md §23): what a client says over
JSON-RPC reaches pi's model, an interrupt ends a turn mid-tool and not pi, an idle
child is closed, and a resumed child is interactive again with its session. The mock
ends a final text with each word after `REPEAT:` in the latest user message: a word in
an answer proves the model got that message. `running_server` proves no process of a
run survives its test."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

from tests.backends.fixtures.record_pi_rpc import open_pipe
from tests.e2e.agents import PI_SPAWN, needs_cli, pi_environment, server_args
from tests.e2e.harness import running_server
from tests.e2e.live import REMEMBERED, LiveClient, gone, resumed, tool_process
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_SLEEP_TOOL, MockLLM

pytestmark = needs_cli("pi")

SPAWN: Final = {**PI_SPAWN, "interactive": True, "stream": True}
STEER_TAKEN: Final = '"command":"prompt","success":true'
"""pi's answer to a prompt it took (a steer is one: `streamingBehavior: steer`)."""


async def test_steered_and_queued_messages_reach_pi_and_an_interrupt_ends_a_turn_mid_tool(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release"
    os.mkfifo(release)  # the tool waits on it: the test says when the tool ends
    with MockLLM(sleep_command=f"cat {release}") as mock:
        env = pi_environment(tmp_path, mock.openai_base_url, retries=False)
        async with running_server(*server_args(tmp_path), env=env) as server:
            client = LiveClient(server)
            # Raw lines too: pi's answer to the steer says it took it.
            params = {**SPAWN, "prompt": f"{KEYWORD_SLEEP_TOOL} please", "stream": "raw"}
            run_id = (await client.result("spawn", params))["runId"]
            await tool_process(run_id, "cat")
            client.skip()  # pi's answers so far are not the steer's
            steer = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:steered"}
            steered = await client.result("run/send", {**steer, "delivery": "steer"})
            assert steered["state"] == "delivered"
            queue = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:queued"}
            queued = await client.result("run/send", queue)
            assert queued["state"] == "queued"
            await client.first(lambda e: e["type"] == "output" and STEER_TAKEN in e["text"])
            await open_pipe(release)
            assert (await client.answer(run_id)).endswith(" steered")
            await client.next(
                run_id, type="input", messageId=queued["messageId"], state="delivered"
            )
            assert (await client.answer(run_id)).endswith(" queued")
            # A long tool, interrupted: the turn ends, its process too, not pi.
            again = {"runId": run_id, "text": f"{KEYWORD_SLEEP_TOOL} again"}
            assert (await client.result("run/send", again))["state"] == "delivered"
            cat = await tool_process(run_id, "cat")
            interrupted = await client.result("run/interrupt", {"runId": run_id})
            assert interrupted["interrupted"] is True
            assert (await client.turn_ended(run_id))["stopReason"] == "interrupted"
            assert await gone(cat)
            after = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:after"}
            assert (await client.result("run/send", after))["state"] == "delivered"
            assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
            closed = await client.result("run/close", {"runId": run_id})
            child = closed["children"][0]
            assert (closed["status"], child["status"]) == ("completed", "completed"), closed
            assert child["output"]["text"].endswith(" after")
            assert child["turn"] == {"count": 4, "state": "waiting"}
            await server.finish()


async def test_pi_asks_no_permissions_an_idle_child_is_closed_and_a_resume_remembers(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url, retries=False)
    async with running_server(*server_args(tmp_path), env=env) as server:
        client = LiveClient(server)
        asking = {**SPAWN, "prompt": "hi", "approvals": "client"}
        checked = await client.result("preflight", asking)
        assert checked["accepted"] is False
        assert "approvals-unsupported" in {d["code"] for d in checked["diagnostics"]}
        refused = await client.error("spawn", asking)
        assert "approvals-unsupported" in {d["code"] for d in refused["data"]["diagnostics"]}
        first = {**SPAWN, "prompt": REMEMBERED, "idleTimeoutMs": 300}
        run_id = (await client.result("spawn", first))["runId"]
        await client.turn_ended(run_id)
        ended = await client.next(run_id, type="status", status="completed")  # idle: closed
        assert ended["output"]["text"].startswith("MOCK-FINAL")
        # Its resume continues its session, interactive again: after its turn it waits
        # until its idle timeout (the same: it cannot be overridden) closes it.
        await resumed(client, run_id, mock)
        await client.next(run_id, type="child", status="completed")
        status = await client.result("status", {"runId": run_id})
        child: dict[str, Any] = status["children"][0]
        assert (child["attempt"], child["status"]) == (2, "completed"), status
        assert child["turn"] == {"count": 1, "state": "waiting"}
        assert child["output"]["text"].endswith(" second")
        await server.finish()
