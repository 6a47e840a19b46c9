"""Each agent CLI's output, replayed from streams recorded from the real CLIs
(tests/backends/fixtures), becomes the same normalized events: the assistant's text,
tools with ACP's kinds, and the usage so far (backends/events.py, protocol.md §11)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from subagent_host.backends.base import OutputParser
from subagent_host.backends.claude import ClaudeParser
from subagent_host.backends.codex import CodexParser
from subagent_host.backends.command import CommandParser
from subagent_host.backends.events import (
    MESSAGE_PIECE_CHARS,
    SUMMARY_CHARS,
    AgentEvent,
    MessageText,
    ToolEnded,
    ToolStarted,
    UsageSoFar,
    summary_of,
)
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.pi import PiParser
from tests.mock_llm import DEFAULT_TOOL_COMMAND, FINAL_TEXT_PREFIX, NARRATION_TEXT

FIXTURES: Final = Path(__file__).resolve().parent / "fixtures"
PARSERS: Final[dict[str, Callable[[], OutputParser]]] = {
    "pi": PiParser,
    "claude": ClaudeParser,
    "codex": CodexParser,
}
EXITED_0: Final = ProcessExit(exit_code=0, signal=None)


def replay(parser: OutputParser, data: bytes, seed: int) -> list[AgentEvent]:
    """Feed `data` in random pieces (lines split anywhere), draining events after each."""
    rng, events, start = random.Random(seed), [], 0
    while start < len(data):
        end = start + rng.randint(1, 900)
        parser.on_stdout(data[start:end])
        events += parser.events()
        start = end
    return events


def shape(events: list[AgentEvent]) -> list[str]:
    """The sequence of event types and tool kinds, one `message` for consecutive text,
    usage left out (how often each CLI reports it differs)."""
    seen: list[str] = []
    for event in events:
        if isinstance(event, MessageText):
            if seen[-1:] != ["message"]:
                seen.append("message")
        elif isinstance(event, ToolStarted):
            seen.append(f"tool start {event.kind}")
        elif isinstance(event, ToolEnded):
            seen.append(f"tool end {event.kind}")
    return seen


def responses(events: list[AgentEvent]) -> list[str]:
    """The text of each model response: the messages up to each `final` one, joined."""
    texts, current = [], ""
    for event in events:
        if isinstance(event, MessageText):
            current += event.text
            if event.final:
                texts.append(current)
                current = ""
    assert current == "", "text after the last final message"
    return texts


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("cli", sorted(PARSERS))
def test_a_narrated_tool_turn_is_the_same_events_for_every_cli(cli: str, seed: int) -> None:
    parser = PARSERS[cli]()
    events = replay(parser, (FIXTURES / cli / "narrated_tool.jsonl").read_bytes(), seed)
    assert shape(events) == [
        "message",
        "tool start execute",
        "tool end execute",
        "message",
    ]
    narration, answer = responses(events)
    assert narration == NARRATION_TEXT
    assert answer.startswith(FINAL_TEXT_PREFIX)
    start, end = [event for event in events if isinstance(event, ToolStarted | ToolEnded)]
    assert isinstance(start, ToolStarted) and isinstance(end, ToolEnded)
    assert start.tool_id and start.tool_id == end.tool_id and start.name == end.name
    assert start.summary is not None and DEFAULT_TOOL_COMMAND in start.summary
    assert end.is_error is False


@pytest.mark.parametrize("cli", sorted(PARSERS))
def test_usage_is_sent_when_it_changed_and_the_last_is_the_outcomes(cli: str) -> None:
    parser = PARSERS[cli]()
    events = replay(parser, (FIXTURES / cli / "narrated_tool.jsonl").read_bytes(), seed=5)
    usages = [event.usage for event in events if isinstance(event, UsageSoFar)]
    assert usages, "no usage event"
    assert all(a != b for a, b in zip(usages, usages[1:], strict=False)), "a repeated usage"
    assert usages[-1] == parser.outcome(EXITED_0).usage
    assert parser.events() == []  # all of it was drained


@pytest.mark.parametrize("cli", sorted(PARSERS))
def test_the_tool_then_answer_streams_replay_to_a_tool_and_a_final_answer(cli: str) -> None:
    parser = PARSERS[cli]()
    events = replay(parser, (FIXTURES / cli / "tool_then_answer.jsonl").read_bytes(), seed=7)
    assert shape(events) == ["tool start execute", "tool end execute", "message"]
    assert responses(events) == [parser.outcome(EXITED_0).final_text]


def test_claudes_usage_grows_with_each_message_before_its_result_adds_the_cost() -> None:
    lines = (FIXTURES / "claude" / "narrated_tool.jsonl").read_bytes().splitlines(keepends=True)
    parser = ClaudeParser()
    seen = []
    for line in lines:
        parser.on_stdout(line)
        seen += [event.usage for event in parser.events() if isinstance(event, UsageSoFar)]
    assert len(seen) == 3  # the first response, the second, then the result's sum
    first, second, result = seen
    assert 0 < first.input_tokens < second.input_tokens
    assert first.cost_usd is None and second.cost_usd is None
    assert result.cost_usd is not None and result.cost_usd > 0


def test_a_tool_that_failed_ends_with_is_error_for_every_cli() -> None:
    pi = PiParser()
    pi.on_stdout(
        b'{"type":"tool_execution_start","toolCallId":"c1","toolName":"bash","args":{"command":"false"}}\n'
        b'{"type":"tool_execution_end","toolCallId":"c1","toolName":"bash","isError":true}\n'
    )
    claude = ClaudeParser()
    claude.on_stdout(
        b'{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1",'
        b'"name":"Bash","input":{"command":"false"}}]},"parent_tool_use_id":null}\n'
        b'{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1",'
        b'"is_error":true,"content":"Exit code 1"}]}}\n'
    )
    codex = CodexParser()
    codex.on_stdout(
        b'{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"false",'
        b'"status":"in_progress"}}\n'
        b'{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"false",'
        b'"exit_code":1,"status":"failed"}}\n'
    )
    for parser in (pi, claude, codex):
        start, end = parser.events()
        assert isinstance(start, ToolStarted) and isinstance(end, ToolEnded)
        assert (start.summary, end.tool_id, end.is_error) == ("false", start.tool_id, True)


def test_a_codex_tool_item_seen_only_completed_starts_and_ends_at_once() -> None:
    parser = CodexParser()
    parser.on_stdout(
        b'{"type":"item.completed","item":{"id":"i9","type":"file_change","status":"completed",'
        b'"changes":[{"path":"/w/a.py","kind":"update"},{"path":"/w/b.py","kind":"add"}]}}\n'
    )
    start, end = parser.events()
    assert isinstance(start, ToolStarted) and isinstance(end, ToolEnded)
    assert (start.kind, start.summary) == ("edit", "/w/a.py, /w/b.py")
    assert (end.tool_id, end.is_error) == ("i9", False)


def test_a_tool_summary_is_one_printable_line_of_at_most_200_characters() -> None:
    parser = PiParser()
    command = "cat <<'EOF' > notes.txt\n" + "x" * 500 + "\n\tEOF\x1b[0m"
    event = {"type": "tool_execution_start", "toolCallId": "c", "toolName": "bash"}
    parser.on_stdout(json.dumps({**event, "args": {"command": command}}).encode() + b"\n")
    (start,) = parser.events()
    assert isinstance(start, ToolStarted) and start.summary is not None
    assert len(start.summary) == SUMMARY_CHARS and start.summary.endswith("…")
    assert start.summary.startswith("cat <<'EOF' > notes.txt xxx") and "\n" not in start.summary
    assert summary_of("  \n ") is None and summary_of(42) is None


def test_a_tool_the_server_does_not_know_is_of_kind_other_without_a_summary() -> None:
    parser = PiParser()
    parser.on_stdout(
        b'{"type":"tool_execution_start","toolCallId":"c","toolName":"secret_tool",'
        b'"args":{"token":"hunter2"}}\n'
    )
    (start,) = parser.events()
    assert isinstance(start, ToolStarted)
    assert (start.name, start.kind, start.summary) == ("secret_tool", "other", None)


def test_a_whole_block_larger_than_a_piece_is_sent_in_pieces_the_last_one_final() -> None:
    text = "é" * (MESSAGE_PIECE_CHARS * 2 + 10)
    parser = CodexParser()
    item = {"id": "m", "type": "agent_message", "text": text}
    parser.on_stdout(json.dumps({"type": "item.completed", "item": item}).encode() + b"\n")
    pieces = parser.events()
    assert [len(p.text) for p in pieces if isinstance(p, MessageText)] == [
        MESSAGE_PIECE_CHARS,
        MESSAGE_PIECE_CHARS,
        10,
    ]
    assert [p.final for p in pieces if isinstance(p, MessageText)] == [False, False, True]


def test_the_deltas_of_one_chunk_are_one_message_event() -> None:
    data = (FIXTURES / "pi" / "narrated_tool.jsonl").read_bytes()
    parser = PiParser()
    parser.on_stdout(data)
    messages = [event for event in parser.events() if isinstance(event, MessageText)]
    assert [m.final for m in messages] == [True, True]
    assert messages[0].text == NARRATION_TEXT


def test_a_plain_command_has_no_normalized_events() -> None:
    parser = CommandParser()
    parser.on_stdout((FIXTURES / "pi" / "narrated_tool.jsonl").read_bytes())
    assert parser.events() == []


def test_claudes_whole_blocks_go_out_once_each_the_last_of_its_response_final() -> None:
    lines = (FIXTURES / "claude" / "narrated_tool.jsonl").read_bytes().splitlines(keepends=True)
    parser = ClaudeParser()
    messages = []
    for line in lines:  # each event a chunk of its own: a block waits for the next event
        parser.on_stdout(line)
        messages += [event for event in parser.events() if isinstance(event, MessageText)]
    assert [m.final for m in messages] == [True, True]
    assert messages[0].text == NARRATION_TEXT
