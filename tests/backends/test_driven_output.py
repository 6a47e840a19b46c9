"""A driven child's parser keeps the answer of its last turn (what followed the last
tool), its head only, and measures all of it: an agent that streams without end costs
the server no more than the largest output cap."""

from __future__ import annotations

import pytest

from subagent_host.backends.events import MessageText, ToolStarted
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.interactive import driven_output
from subagent_host.backends.interactive.base import TurnEnded, TurnStarted
from subagent_host.backends.interactive.command_lines import CommandConversation
from subagent_host.backends.interactive.driven_output import DrivenOutput
from subagent_host.backends.jsonlines import MAX_LINE_BYTES
from subagent_host.values.choices import ToolKind


def parser() -> DrivenOutput:
    output = DrivenOutput("acp-test", CommandConversation())
    output.attach(lambda reaction: None)
    return output


def test_the_answer_is_what_followed_the_last_tool_of_the_last_turn() -> None:
    output = parser()
    output.take([TurnStarted(), MessageText("first "), TurnEnded("end_turn")])
    output.take([TurnStarted(), MessageText("looking"), ToolStarted("t1", "read", ToolKind.READ)])
    output.take([MessageText("it is "), MessageText("done\n"), TurnEnded("end_turn")])
    outcome = output.outcome(ProcessExit.from_returncode(0))
    assert (outcome.completed, outcome.final_text) == (True, "it is done\n")
    assert (outcome.final_bytes, outcome.final_lines) == (11, 1)


def test_a_turns_text_keeps_its_head_and_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(driven_output, "TURN_TEXT_CHARS", 10)
    output = parser()
    output.take([TurnStarted()])
    output.take([MessageText("é" * 4 + "\n")] * 5)  # 5 chunks of 9 bytes, 5 characters
    outcome = output.outcome(ProcessExit.from_returncode(0))
    assert outcome.final_text == "éééé\néééé\n"
    assert (outcome.final_bytes, outcome.final_lines) == (45, 5)


def test_a_failure_counts_the_lines_dropped_for_their_length() -> None:
    output = parser()
    output.take([TurnStarted()])
    too_long = b"x" * (MAX_LINE_BYTES + 1)
    output.on_stdout(too_long[: MAX_LINE_BYTES // 2])  # split anywhere, dropped once
    output.on_stdout(too_long[MAX_LINE_BYTES // 2 :] + b"\n" + b"short\n")
    exited = output.outcome(ProcessExit.from_returncode(3))
    assert (exited.completed, exited.error_code) == (False, "exit-status")
    assert exited.error_data is not None and exited.error_data["droppedLines"] == 1
    output.failure = "the agent broke its protocol"
    broken = output.outcome(ProcessExit.from_returncode(0))
    assert (broken.completed, broken.error_code) == (False, "protocol-error")
    assert broken.error_data is not None and broken.error_data["droppedLines"] == 1


def test_a_failure_without_dropped_lines_says_none() -> None:
    output = parser()
    output.on_stdout(b"short\n")
    exited = output.outcome(ProcessExit.from_returncode(3))
    assert exited.error_data is not None and "droppedLines" not in exited.error_data
