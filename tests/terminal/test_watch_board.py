"""What `watch` says of a failed child: its error, and the line of stderr that says why
chosen by the same per-CLI rule as the error message (tests/fixtures/cli_failures)."""

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
from subagent_host.runs.state import ChildRun, RunStatus
from subagent_host.terminal.watch_board import child_activity
from subagent_host.values.facts import ErrorInfo

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cli_failures"
EXITED_1 = ProcessExit(exit_code=1, signal=None)
PARSERS: dict[str, Callable[[], OutputParser]] = {
    "pi": PiParser,
    "claude": ClaudeParser,
    "codex": CodexParser,
    "command": CommandParser,
}


def failed_child(backend: str, error: ErrorInfo) -> ChildRun:
    return ChildRun(index=0, backend=backend, status=RunStatus.FAILED, error=error)


def recorded_failure(backend: str, fixture: str) -> ErrorInfo:
    """The error a child of `backend` records for the recorded failure `fixture`."""
    parser = PARSERS[backend]()
    parser.on_stdout((FIXTURES / f"{fixture}.stdout").read_bytes())
    parser.on_stderr((FIXTURES / f"{fixture}.stderr").read_bytes())
    outcome = parser.outcome(EXITED_1)
    assert outcome.error_code is not None and outcome.error_message is not None
    return ErrorInfo(outcome.error_code, outcome.error_message, dict(outcome.error_data or {}))


@pytest.mark.parametrize(
    ("backend", "fixture", "shown"),
    [
        # pi prints why first, then `See:` and the paths of its docs: no path is shown.
        ("pi", "pi-no-key", "pi exited with status 1: No API key found for the selected model."),
        (
            "command",
            "pi-no-key",
            "command exited with status 1: No API key found for the selected model.",
        ),
        (
            "codex",
            "codex-unknown-provider",
            "codex exited with status 1: Model provider `nosuch` not found",
        ),
    ],
)
def test_a_recorded_failure_shows_its_error_whose_reason_is_not_said_twice_or_replaced(
    backend: str, fixture: str, shown: str
) -> None:
    error = recorded_failure(backend, fixture)
    assert child_activity(failed_child(backend, error), None) == shown


def test_an_error_that_does_not_say_why_is_followed_by_the_line_of_stderr_that_does() -> None:
    # A Node crash ends in its stack frames and its version: neither says why.
    stderr = "Error: socket hang up\n    at connect (net.js:1:2)\n\nNode.js v22.12.0\n"
    error = ErrorInfo("exit-status", "claude exited with status 1", {"stderrTail": stderr})
    shown = child_activity(failed_child("claude", error), None)
    assert shown == "claude exited with status 1: socket hang up"
