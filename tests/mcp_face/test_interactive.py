"""The tools `send`, `interrupt` and `close` of `subagent-host mcp`, driven by the official
SDK's stdio client, against an interactive command child (protocol.md §22, §23): a
message is one line on its stdin, its turn ends at its next stdout line, an interrupt
is SIGINT. Each test proves afterwards that the face, its serve child and every run's
processes are gone (tests/e2e/mcp_client.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.mcp_client import McpServer, mcp_server, text_of

pytestmark = pytest.mark.e2e

# Answers each line it reads with one line, but `quiet` lines (a turn that goes on until
# it is interrupted); a SIGINT ends the turn, not the program (a REPL's Ctrl-C).
ECHO: Final = """
import signal, sys
signal.signal(signal.SIGINT, lambda *_: None)
for line in sys.stdin:
    if not line.startswith("quiet"):
        print("got", line.strip(), flush=True)
"""


def interactive(script: str, prompt: str = "hello") -> dict[str, Any]:
    return {"command": ["python3", "-u", "-c", script], "prompt": prompt, "interactive": True}


async def started(server: McpServer, script: str) -> str:
    """An interactive child started and its first turn over: its run's id."""
    run = await server.ok("spawn", {**interactive(script), "waitSeconds": 30})
    assert run["status"] == "running", run
    [child] = run["children"]
    assert child["turn"] == {"count": 1, "state": "waiting"}, child
    return str(run["runId"])


async def test_spawn_waits_for_the_first_turn_then_send_and_wait_answer_each_message(
    tmp_path: Path,
) -> None:
    async with mcp_server(tmp_path) as server:
        result = await server.call("spawn", {**interactive(ECHO), "waitSeconds": 30})
        run_id = result.structured_content["runId"] if result.structured_content else None
        assert isinstance(run_id, str)
        text = text_of(result)
        assert f"waiting for input: call send with runId {run_id}" in text
        assert "child 0 (command): running, turn 1, waiting for input" in text

        sent = await server.call("send", {"runId": run_id, "text": "second"})
        assert not sent.is_error, text_of(sent)
        assert sent.structured_content is not None
        assert sent.structured_content["state"] == "delivered"
        message_id = sent.structured_content["messageId"]
        assert text_of(sent) == (
            f"message {message_id} to run {run_id}: delivered\n"
            f"for the reply, call wait with runId {run_id}"
        )
        replied = await server.ok("wait", {"runId": run_id, "waitSeconds": 30})
        assert replied["status"] == "running"
        assert replied["children"][0]["turn"] == {"count": 2, "state": "waiting"}

        queued = await server.ok("send", {"runId": run_id, "text": "third", "delivery": "queue"})
        assert queued["state"] == "delivered"  # no turn was running: written at once

        closed = await server.call("close", {"runId": run_id})
        assert not closed.is_error, text_of(closed)
        assert closed.structured_content is not None
        assert closed.structured_content["status"] == "completed"
        output = closed.structured_content["output"]["text"]
        assert output.splitlines() == ["got hello", "got second", "got third"]
        assert "run " + run_id + " (single): completed" in text_of(closed)


async def test_interrupt_ends_the_running_turn_and_says_when_none_runs(tmp_path: Path) -> None:
    async with mcp_server(tmp_path) as server:
        run_id = await started(server, ECHO)  # its first answer: its SIGINT handler is set
        idle = await server.call("interrupt", {"runId": run_id, "index": 0})
        assert not idle.is_error, text_of(idle)
        assert idle.structured_content == {
            "interrupted": False,
            "turn": {"count": 1, "state": "waiting"},
        }
        assert text_of(idle) == f"run {run_id}: no turn was running (turn 1, waiting)"

        await server.ok("send", {"runId": run_id, "text": "quiet, please"})
        interrupted = await server.call("interrupt", {"runId": run_id})
        assert not interrupted.is_error, text_of(interrupted)
        assert interrupted.structured_content == {
            "interrupted": True,
            "turn": {"count": 2, "state": "running"},
        }
        assert text_of(interrupted) == f"run {run_id}: turn 2 is being interrupted"
        waiting = await server.ok("wait", {"runId": run_id, "waitSeconds": 30})
        assert waiting["children"][0]["turn"] == {"count": 2, "state": "waiting"}

        await server.ok("send", {"runId": run_id, "text": "still there?"})
        await server.ok("wait", {"runId": run_id, "waitSeconds": 30})
        closed = await server.ok("close", {"runId": run_id})
        assert closed["output"]["text"] == "got hello\ngot still there?\n"


async def test_what_the_server_refuses_is_a_tool_error_in_its_words(tmp_path: Path) -> None:
    async with mcp_server(tmp_path) as server:
        one_shot = await server.ok("spawn", {"command": ["true"], "waitSeconds": 30})
        refused = await server.call("send", {"runId": one_shot["runId"], "text": "hi"})
        assert refused.is_error
        assert text_of(refused).startswith("error -32003: ")
        assert "interactive" in text_of(refused)

        run_id = await started(server, ECHO)
        await server.ok("close", {"runId": run_id})
        for tool, arguments in (
            ("send", {"runId": run_id, "text": "late"}),
            ("interrupt", {"runId": run_id}),
        ):
            gone = await server.call(tool, arguments)
            assert gone.is_error, tool
            assert text_of(gone).startswith("error -32003: "), text_of(gone)

        bad = await server.call("send", {"runId": run_id, "text": "x", "delivery": "later"})
        assert bad.is_error
        assert text_of(bad).startswith("invalid params: delivery: "), text_of(bad)
        out_of_range = await server.call("interrupt", {"runId": run_id, "index": 5})
        assert out_of_range.is_error
        assert text_of(out_of_range).startswith("error -32602: "), text_of(out_of_range)
        missing = await server.call("send", {"runId": run_id})
        assert missing.is_error
        assert text_of(missing).startswith("invalid params: text: "), text_of(missing)


async def test_a_launch_refused_after_client_was_sent_as_policy_says_so(tmp_path: Path) -> None:
    """The SDK's client here cannot elicit, so the face sends `approvals: "client"` as
    `policy`; a command takes neither, and the server's refusal names `policy`: the text
    says it was the face's, not the caller's. One that asked for `policy` gets no such line."""
    async with mcp_server(tmp_path) as server:
        unsupported = {"command": ["true"], "approvals": "client"}
        for launch in (unsupported, {"tasks": [unsupported]}):  # the call's or an item's
            refused = await server.call("spawn", launch)
            assert refused.is_error, text_of(refused)
            *said, note = text_of(refused).splitlines()
            assert said[0].startswith("error -32003: launch rejected: "), said
            [why] = [line for line in said if line.startswith("error approvals-unsupported")]
            assert "'policy'" in why, said
            assert note == (
                'approvals: "client" was sent as "policy": this MCP client cannot be asked (no '
                'form elicitation), so the refusal above is of "policy", not of the "client" '
                "asked for"
            )
        own = await server.call("spawn", {"command": ["true"], "approvals": "policy"})
        assert own.is_error, text_of(own)
        assert "approvals-unsupported" in text_of(own)
        assert "was sent as" not in text_of(own)
