"""A live status line for one run on a terminal's stderr: elapsed, status, what it does,
tokens (protocol.md §7.1, `run`), kept at the bottom while the run's output scrolls above.

Drawn by hand on one row (carriage return, the line cut to the width, erase to its end),
styled by rich; erased when the run has ended, so what stays on the screen is the run's
own output. Shown only when stderr is a terminal: on a pipe or a file nothing is drawn,
so a script's stderr holds errors only. And only while this process is in its terminal's
foreground process group: a `run … &` in the background would otherwise draw over the
shell's prompt and the next command's output (and, with `stty tostop`, be stopped by
SIGTTOU). Each redraw asks again, so `fg` brings the line back.

An interactive run (`run -i`) asks a person at the bottom instead: `ask` puts a prompt
in the line's place, the cursor after it, until the answer's line ends (`answered`) or
the question no longer stands (`withdraw`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from rich.console import Console, RenderableType
from rich.spinner import Spinner
from rich.text import Text

from subagent_host.rpc.wire import EventWire, RunSnapshot
from subagent_host.terminal import views
from subagent_host.terminal.scope import Scope
from subagent_host.values import RunStatus
from subagent_host.values.events import ActivityEvent, ChildEvent, OutputEvent, StatusEvent

REFRESHES_PER_SECOND: Final = 8
# What the line shows of an activity or an output line: one terminal row, not a page.
ACTIVITY_CHARS: Final = 60
# To the line's start, then erase the whole row: the line is gone, the cursor where it began.
ERASE: Final = "\r\x1b[2K"


class RunProgress(Scope):
    """What the line shows, updated from the run's events and snapshots; a no-op unless
    stderr is a terminal. Use as a context manager around following the run, inside a
    running event loop (the line is redrawn by a task of its own)."""

    def __init__(self, console: Console | None = None) -> None:
        self._console = console or Console(stderr=True)
        # rich would also draw on a pipe under FORCE_COLOR: the line is for a person only.
        self.shown = sys.stderr.isatty() and self._console.is_terminal
        self._drawn = False
        """Whether the line (or the prompt) is on the screen, the cursor on its row."""
        self._prompt: str | None = None
        """The question shown in the line's place, while a person answers it."""
        self._redrawing: asyncio.Task[None] | None = None
        self._spinner = Spinner("dots")
        self.run_id = ""
        self.status = "starting"
        self.activity = ""
        self.tokens = "-"
        self._began = datetime.now(UTC)
        self._since: datetime | None = None
        """When the run started; until then the time is counted from this command's start."""

    def open(self) -> None:
        if self.shown:
            self._redrawing = asyncio.get_running_loop().create_task(self._redraw_often())

    def close(self) -> None:
        if self._redrawing is not None:
            self._redrawing.cancel()  # it waits between two drawings: it draws no more
            self._redrawing = None
        with contextlib.suppress(OSError):  # a terminal that hung up (SIGHUP) takes no more
            self._erase()

    def above(self, write: Callable[[], None]) -> None:
        """Let `write` print (and flush) lines of the run's output above the line: the
        line is erased first and drawn again below them."""
        drawn = self._drawn
        self._erase()
        write()
        if drawn:
            self.redraw()

    def ask(self, prompt: str) -> None:
        """Show `prompt` in the line's place, the cursor after it, for a person to type the
        answer there (a terminal echoes it); a no-op while it shows already. Output printed
        meanwhile goes above it, and the prompt is drawn again below (what was typed of the
        answer so far is still read, though no longer shown)."""
        if not self.shown or self._prompt == prompt:
            return
        self._erase()
        self._prompt = prompt
        self.redraw()

    def answered(self) -> None:
        """The person ended the answer's line (Enter): the prompt and the answer stay on
        the screen as they are, and the line comes back below them."""
        self._prompt = None
        self._drawn = False

    def withdraw(self) -> None:
        """The question no longer stands (its answer is not wanted): the prompt is erased
        and the line comes back in its place."""
        if self._prompt is not None:
            self._erase()
            self._prompt = None

    def redraw(self) -> None:
        """Draw the line afresh, if this process is in the foreground (else not at all)."""
        if not self.shown or not _in_foreground(self._console):
            self._drawn = False  # the shell owns the screen now: the line is not ours
            return
        if self._prompt is not None:
            self._write(ERASE + self._prompt)
            self._drawn = True
            return
        width = max(self._console.width - 1, 1)  # never the last column: no wrap
        with self._console.capture() as captured:
            self._console.print(
                self.render(), end="", width=width, no_wrap=True, overflow="ellipsis"
            )
        self._write(ERASE + captured.get())
        self._drawn = True

    def _erase(self) -> None:
        if self._drawn and _in_foreground(self._console):
            self._write(ERASE)
        self._drawn = False

    def _write(self, text: str) -> None:
        self._console.file.write(text)
        self._console.file.flush()

    async def _redraw_often(self) -> None:
        """The elapsed time and the spinner move without events; the foreground is asked
        again at each drawing."""
        while True:
            if self._prompt is None:  # drawn again, a prompt would erase what is typed
                with contextlib.suppress(OSError):
                    self.redraw()
            await asyncio.sleep(1 / REFRESHES_PER_SECOND)

    def started(self, snapshot: RunSnapshot) -> None:
        self.run_id = snapshot.run_id
        self.seen(snapshot)

    def seen(self, snapshot: RunSnapshot) -> None:
        """A fresh snapshot: its status, start and tokens."""
        if self.status != "stopping":
            self.status = snapshot.status
        self._since = snapshot.started_at or self._since
        self.tokens = views.tokens(snapshot.usage)

    def event(self, event: EventWire) -> None:
        """An event: a new status, or what the child does now (an output's last line for
        a command child)."""
        match event.event:
            case StatusEvent(status=status) if self.status != "stopping":
                self.status = status
            case ChildEvent(status=RunStatus.RUNNING) if self._since is None:
                self._since = event.at
            case ActivityEvent(text=text) | OutputEvent(text=text) if text:
                # Its last line as a terminal would leave it, without escapes or control
                # characters: they would tear the line apart.
                self.activity = views.last_line(text) or self.activity
            case _:
                pass

    def stopping(self) -> None:
        self.status = "stopping"

    def render(self) -> RenderableType:
        parts: list[str | Text | tuple[str, str]] = [
            (views.short_id(self.run_id) or "-", "bold"),
            " ",
            views.status_text(self.status),
            " ",
            views.elapsed(self._since or self._began, None, datetime.now(UTC)),
        ]
        if self.activity:
            parts += ["  ", (views.shorten(self.activity, ACTIVITY_CHARS), "dim")]
        if self.tokens != "-":
            parts += ["  ", self.tokens]
        frames = self._spinner.frames
        frame = frames[int(time.monotonic() * 1000 / self._spinner.interval) % len(frames)]
        return Text.assemble(frame, " ", *parts)


def _in_foreground(console: Console) -> bool:
    """Whether this process's group is its terminal's foreground group: the one a person
    is looking at, the only one that may draw (a background one would draw over the
    shell)."""
    try:
        return os.tcgetpgrp(console.file.fileno()) == os.getpgrp()
    except (OSError, ValueError):  # not a terminal (any more), or a file with no descriptor
        return False
