"""What adapters put in activity lines, error messages and error data, spelled one way for all."""

from __future__ import annotations

import re
import signal
from typing import Final

from subagent_host.backends.exits import ProcessExit

# How much of stderr an error carries: enough to see why, small enough to send.
STDERR_TAIL_BYTES: Final = 4 * 1024
# Lines of a stack trace (Node's `at fn (file:1:2)`, Python's `File "x", line 1`) and
# the label before an error's sentence: what a person does not need in a message.
STACK_FRAME: Final = re.compile(r'(at |File "|Traceback \(most recent call last\))')
ERROR_LABEL: Final = re.compile(r"^(?:[A-Za-z]*Error|error|fatal|Fatal): +")


def short(value: object, limit: int = 64) -> str:
    """A name or number fit for an activity line or message: printable, bounded."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    text = value if isinstance(value, str) else "?"
    return "".join(c for c in text if c.isprintable())[:limit]


def last_meaningful_line(stderr_tail: str, limit: int = 200) -> str | None:
    """The last line of stderr that says something: not blank, not a stack frame
    (`    at ...`, `File "..."`), without an `Error: ` label; printable, bounded."""
    for line in reversed(stderr_tail.splitlines()):
        text = "".join(c for c in line if c.isprintable()).strip()
        if not text or STACK_FRAME.match(text) or not any(c.isalnum() for c in text):
            continue
        return ERROR_LABEL.sub("", text, count=1)[:limit] or None
    return None


def error_data(exit_status: ProcessExit, stderr_tail: str, dropped_lines: int) -> dict[str, object]:
    """A failed agent child's `error.data`: how it exited, its stderr tail, lines dropped."""
    data: dict[str, object] = {"stderrTail": stderr_tail}
    if exit_status.exit_code is not None:
        data["exitCode"] = exit_status.exit_code
    elif exit_status.signal is not None:
        data["signal"] = signal.Signals(exit_status.signal).name
    if dropped_lines:
        data["droppedLines"] = dropped_lines
    return data


def exit_message(program: str, exit_status: ProcessExit, unfinished: str = "finishing") -> str:
    """Why a run of `program` ended without its answer (`unfinished`: what it left undone
    when it still exited with status 0)."""
    if exit_status.exit_code == 0:
        return f"{program} exited without {unfinished}"
    if exit_status.exit_code is not None:
        return f"{program} exited with status {exit_status.exit_code}"
    assert exit_status.signal is not None
    return f"{program} was killed by {signal.Signals(exit_status.signal).name}"
