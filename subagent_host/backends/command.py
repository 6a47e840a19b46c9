"""The `command` backend: run an argv as given; the prompt, if any, goes to stdin.

Final text is stdout; a bounded tail of stderr is kept beside it, however the child
ended. A non-zero exit (or a killing signal) is `failed` with `exitCode`/`signal` and
the same stderr tail in `error.data`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from subagent_host.backends.base import EFFECTS, BuiltInBackend, ItemSpec, Launch, ParsedOutcome
from subagent_host.backends.events import AgentEvent
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.output import CappedText, RollingTail, StreamSize
from subagent_host.backends.reports import (
    STDERR_TAIL_BYTES,
    error_data,
    exit_message,
    stderr_reason,
    with_reason,
)
from subagent_host.values.choices import Effect
from subagent_host.values.facts import Usage

# Stdout kept for the final text: what a snapshot shows is capped lower, but a
# chain passes up to 64 KiB of it on as {previous}.
FINAL_TEXT_BYTES: Final = 64 * 1024
FINAL_TEXT_LINES: Final = 1_000_000


class CommandParser:
    def __init__(self) -> None:
        self.stdout = CappedText(FINAL_TEXT_BYTES, FINAL_TEXT_LINES)
        self.stderr = RollingTail()

    def on_stdout(self, data: bytes) -> None:
        self.stdout.feed(data)

    @property
    def keeps_stdout(self) -> bool:
        """Whether more stdout would be kept (its final text is its stdout's head): once
        not, the child sink only counts the rest (runs/child_sink.py)."""
        return not self.stdout.full

    @property
    def stdout_size(self) -> StreamSize:
        """The size of the stdout it was given."""
        return self.stdout

    def on_stderr(self, data: bytes) -> None:
        self.stderr.feed(data)

    def activity(self) -> list[str]:
        return []  # a plain command reports no structured activity

    def events(self) -> list[AgentEvent]:
        return []  # nor text, tools or usage: its output is its own

    @property
    def finished(self) -> bool:
        return False  # a plain command is done when it exits

    @property
    def turns(self) -> int:
        return 0  # a plain command makes no model responses the server could count

    @property
    def usage(self) -> Usage | None:
        return None  # a plain command reports no tokens

    @property
    def session_id(self) -> str | None:
        return None  # a plain command has no session of its own

    def outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        stdout = self.stdout.result()
        text, size, lines = stdout.text, stdout.bytes, stdout.lines
        # Kept whatever the exit: what a command said on stderr matters when it succeeded too.
        stderr = self.stderr.text(STDERR_TAIL_BYTES)
        output = ParsedOutcome(
            completed=True,
            final_text=text,
            final_bytes=size,
            final_lines=lines,
            stderr_tail=stderr or None,
        )
        if exit_status.exit_code == 0:
            return output
        data = error_data(exit_status, stderr, dropped_lines=0)
        # A program's last word on stderr is usually why it failed (`make: *** [all]
        # Error 2`, a Python exception): the status alone does not say what to fix.
        message = with_reason(
            exit_message("command", exit_status), stderr_reason("command", stderr)
        )
        return output.failed("exit-status", message, data)


class CommandBackend(BuiltInBackend):
    """A plain program: it has no protocol to ask in, so nothing is asked or answered (the
    built-ins' defaults)."""

    id = "command"
    # An arbitrary program runs with the user's own permissions: it may do anything.
    tools: Mapping[str, frozenset[Effect]] = {"command": frozenset(EFFECTS)}
    tools_required = False
    restrictable = False
    env_allowed: frozenset[str] = frozenset()
    executable = ""  # the command's own argv[0]
    thinking_levels: tuple[str, ...] = ()

    def prepare(self, item: ItemSpec) -> Launch:
        assert item.command, "a command item has an argv"
        stdin = item.prompt.encode("utf-8") if item.prompt is not None else None
        return Launch(argv=item.command, stdin=stdin, env=dict(item.env), cwd=item.cwd)

    def parser(self) -> CommandParser:
        return CommandParser()
