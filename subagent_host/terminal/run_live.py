"""The run's output as it comes, for `subagent-host run` (protocol.md §7.1): on a terminal,
a command's stdout line by line, an agent's text line by line and one line per tool call
(the normalized agent events of §11), each printed above the live line; and a command's
stderr (its `stderr` events) on this command's stderr.

Whole lines only while the run goes on: the status line is redrawn below each one, and a
line cut in the middle would be torn by it. What is left of a last line is printed at the
end.
"""

from __future__ import annotations

import sys
from typing import Final

from rich.console import Console

from subagent_host.rpc.wire import EventWire
from subagent_host.terminal import views
from subagent_host.terminal.lines import OpenLines
from subagent_host.terminal.progress import RunProgress
from subagent_host.values.events import (
    MessageEvent,
    OutputEvent,
    Phase,
    PlanEvent,
    StderrEvent,
    ToolEvent,
)

# The mark before a tool call's line: set apart from the agent's own text.
TOOL_MARK: Final = "›"


class LiveOutput:
    """Prints the run's events to stdout as lines, above `progress`'s line."""

    def __init__(self, progress: RunProgress) -> None:
        self._progress = progress
        self._lines = OpenLines()
        """The last line's start, until its end comes."""
        self.printed = False
        """Whether any of the run's output was printed."""

    def take(self, event: EventWire) -> None:
        match event.event:
            case OutputEvent(text=text) | MessageEvent(text=text) if text:
                lines = self._lines.feed(0, text)
                if lines:
                    self._print("".join(line + "\n" for line in lines))
            case _:
                pass
        match event.event:
            case MessageEvent(final=True):
                self.flush()  # a response's text has ended: its last line with it
            case ToolEvent(phase=Phase.START, summary=summary, name=name, kind=kind):
                self.flush()
                self._print(f"{TOOL_MARK} {kind}: {summary or name}\n")
            case PlanEvent(entries=entries):
                self.flush()
                self._print(f"{TOOL_MARK} {views.plan_line(entries)}\n")
            case _:
                pass

    def flush(self) -> None:
        """What is left of a last line, ended (the prompt after it starts on its own)."""
        pending = self._lines.take(0)
        if pending is not None:
            self._print(pending + "\n")

    def _print(self, text: str) -> None:
        def write() -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        self._progress.above(write)
        self.printed = True


class LiveStderr:
    """Prints a command child's stderr to this command's stderr as it comes.

    Among the output lines of a terminal (`marked`: stdout and stderr both are one), each
    line is marked as `logs` marks it (`stderr│ `, in red). Otherwise it is written as the
    child wrote it, as if the command had been run directly: line by line while the status
    line is drawn below, as it comes where none is.
    """

    def __init__(self, progress: RunProgress, *, marked: bool) -> None:
        self._progress = progress
        self._marked = marked
        self._by_line = marked or progress.shown
        self._lines = OpenLines()
        self._console = Console(stderr=True) if marked else None
        self._gone = False
        """Whether this command's stderr can no longer be written to."""
        self.shown = False
        """Whether any of the child's stderr was shown."""

    def take(self, event: EventWire) -> None:
        if not isinstance(event.event, StderrEvent) or not event.event.text:
            return
        self.shown = True
        if not self._by_line:
            self._write(event.event.text)
            return
        lines = self._lines.feed(0, event.event.text)
        if lines:
            self._progress.above(lambda: self._print(lines))

    def flush(self) -> None:
        """What is left of a last line, ended (only when shown line by line)."""
        pending = self._lines.take(0)
        if pending is not None:
            self._progress.above(lambda: self._print([pending]))

    def _print(self, lines: list[str]) -> None:
        if self._console is None:
            self._write("".join(line + "\n" for line in lines))
            return
        for line in lines:
            self._console.print(views.stderr_line(line, terminal=True), soft_wrap=True)

    def _write(self, text: str) -> None:
        if self._gone:
            return
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except OSError:  # nobody reads it any more (a closed pipe): the run goes on
            self._gone = True
