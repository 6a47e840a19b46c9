"""What adapters put in activity lines, error messages and error data, spelled one way for all."""

from __future__ import annotations

import errno
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
WARNING_LABEL: Final = re.compile(r"^(?:warning|warn)\b", re.IGNORECASE)
# What Node prints last after an uncaught exception: its version, not the reason.
NODE_VERSION: Final = re.compile(r"^Node\.js v\d+(?:\.\d+)*$")
# A line that is only a URL or a file path (a program's "see:" list): where to read
# more, never why it failed.
POINTER: Final = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|~?\.{0,2}/)\S*$", re.IGNORECASE)


def short(value: object, limit: int = 64) -> str:
    """A name or number fit for an activity line or message: printable, bounded."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    text = value if isinstance(value, str) else "?"
    return "".join(c for c in text if c.isprintable())[:limit]


def last_meaningful_line(stderr_tail: str, limit: int = 200) -> str | None:
    """The last line of stderr that says something (see `_saying`): the rule for a
    program of which nothing more is known, whose last word is usually its reason.
    A line ending in `:` only introduces the lines after it (`See:` and paths), which
    said nothing: it is passed over too."""
    for line in reversed(stderr_tail.splitlines()):
        said = _saying(line, limit)
        if said is not None and not said.endswith(":"):
            return said
    return None


def first_meaningful_line(stderr_tail: str, limit: int = 200) -> str | None:
    """The first line of stderr that says something and is not a warning: the rule for
    a CLI that prints its reason first and how to fix it after (pi: `No API key found
    for the selected model.`, then `Use /login ... See:` and the paths of its docs)."""
    lines = stderr_tail.splitlines()
    if any(STACK_FRAME.match(line.strip()) for line in lines):
        # A crash, not a reason it chose to print: Node puts the source line first and
        # the exception last (before its frames), as Python does.
        return last_meaningful_line(stderr_tail, limit)
    for line in lines:
        said = _saying(line, limit)
        if said is not None and not WARNING_LABEL.match(said):
            return said
    return None


# The programs that print why they failed first and how to fix it after (pi: `No API
# key found for the selected model.`, then `Use /login ... See:` and the paths of its
# docs; a `Warning:` before it is not the reason); every other program's last word is
# taken as its reason.
REASON_FIRST: Final = frozenset({"pi"})


def stderr_reason(program: str, stderr_tail: str) -> str | None:
    """The line of `program`'s stderr that says why it failed, by its rule: the first
    meaningful line for a program in `REASON_FIRST`, else the last. Every place that
    shows a failure picks its line here (the error message, `watch`)."""
    if program in REASON_FIRST:
        return first_meaningful_line(stderr_tail)
    return last_meaningful_line(stderr_tail)


def _saying(line: str, limit: int) -> str | None:
    """`line` printable, bounded and without an `Error: ` label; None for a line that
    tells a person nothing: blank, a stack frame (`    at ...`, `File "..."`), only
    punctuation, only a path or URL (a pointer to read more, not the reason), or the
    Node version a crash ends with."""
    text = "".join(c for c in line if c.isprintable()).strip()
    if not text or STACK_FRAME.match(text) or POINTER.match(text) or NODE_VERSION.match(text):
        return None
    if not any(c.isalnum() for c in text):
        return None
    return ERROR_LABEL.sub("", text, count=1)[:limit] or None


def with_reason(message: str, reason: str | None) -> str:
    """`message` and the line that says why (`pi exited with status 1: No API key found
    for the selected model.`): a status alone does not tell a person what to fix."""
    return f"{message}: {reason}" if reason else message


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


# How much of a program name a spawn-failed message quotes.
PROGRAM_SHOWN_CHARS: Final = 200


def start_failure(program: str, exc: OSError) -> str:
    """The `spawn-failed` message: which program, and why `exec` refused it."""
    shown = repr(program[:PROGRAM_SHOWN_CHARS]) + (
        "..." if len(program) > PROGRAM_SHOWN_CHARS else ""
    )
    message = f"cannot start {shown}: {exc.strerror or exc}"
    if exc.errno == errno.E2BIG:
        message += (
            " (one argument may hold at most 128 KiB, and all of them with the"
            " environment no more than the system's ARG_MAX)"
        )
    return message
