"""While an agent's tool runs the CLI prints nothing: each parser says so, so the stall
detector does not mistake a long tool for a hung agent (streams recorded from the real CLIs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagent_host.backends.claude import ClaudeParser
from subagent_host.backends.codex import CodexParser
from subagent_host.backends.pi import PiParser

FIXTURES = Path(__file__).resolve().parent / "fixtures"
Parser = PiParser | ClaudeParser | CodexParser


@pytest.mark.parametrize(
    ("parser", "stream"),
    [
        (PiParser(), "pi/tool_then_answer.jsonl"),
        (ClaudeParser(), "claude/tool_then_answer.jsonl"),
        (CodexParser(), "codex/tool_then_answer.jsonl"),
    ],
    ids=["pi", "claude", "codex"],
)
def test_a_tool_is_running_between_its_start_and_its_result(parser: Parser, stream: str) -> None:
    seen = []
    for line in (FIXTURES / stream).read_bytes().splitlines(keepends=True):
        parser.on_stdout(line)
        seen.append(parser.tool_running)
    assert any(seen), "the tool was never seen running"
    first = seen.index(True)
    assert not any(seen[:first]) and not seen[-1]  # idle before the call and at the end
    assert False in seen[first:]  # the tool's result ended it
