"""Every parser tells the usage reported so far, before the child has exited: what a
child ended early keeps (streams recorded from the real CLIs, tests/backends/fixtures)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from subagent_host.backends.base import OutputParser
from subagent_host.backends.claude import ClaudeParser
from subagent_host.backends.codex import CodexParser
from subagent_host.backends.command import CommandParser
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.pi import PiParser

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PARSERS: dict[str, Callable[[], OutputParser]] = {
    "pi": PiParser,
    "claude": ClaudeParser,
    "codex": CodexParser,
}


@pytest.mark.parametrize("cli", sorted(PARSERS))
def test_usage_so_far_is_none_before_any_report_and_the_outcomes_usage_after_the_last(
    cli: str,
) -> None:
    parser: OutputParser = PARSERS[cli]()
    assert parser.usage is None
    parser.on_stdout((FIXTURES / cli / "tool_then_answer.jsonl").read_bytes())
    so_far = parser.usage
    assert so_far is not None and so_far.input_tokens > 0 and so_far.output_tokens > 0
    assert parser.outcome(ProcessExit(exit_code=0, signal=None)).usage == so_far


def test_a_plain_command_reports_no_usage() -> None:
    parser = CommandParser()
    parser.on_stdout(b'{"usage": {"input_tokens": 5}}\n')
    assert parser.usage is None
