"""A live status line for one run on a terminal's stderr: elapsed, status, what it does,
tokens (protocol.md §7, `run`).

Drawn with rich's `Live` (transient: gone once the run has ended, so what stays on the
screen is the run's own output). Shown only when stderr is a terminal: on a pipe or a
file nothing is drawn, so a script's stderr holds errors only.
"""

from __future__ import annotations

import contextlib
import sys
from datetime import UTC, datetime
from typing import Final

from rich.console import Console, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from subagent_host.rpc.wire import EventWire, RunSnapshot
from subagent_host.terminal import views
from subagent_host.terminal.scope import Scope

REFRESHES_PER_SECOND: Final = 8
# What the line shows of an activity or an output line: one terminal row, not a page.
ACTIVITY_CHARS: Final = 60


class RunProgress(Scope):
    """What the line shows, updated from the run's events and snapshots; a no-op unless
    stderr is a terminal. Use as a context manager around following the run."""

    def __init__(self, console: Console | None = None) -> None:
        self._console = console or Console(stderr=True)
        # rich would also draw on a pipe under FORCE_COLOR: the line is for a person only.
        self.shown = sys.stderr.isatty() and self._console.is_terminal
        self._live: Live | None = None
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
            self._live = Live(
                _Line(self),
                console=self._console,
                transient=True,
                refresh_per_second=REFRESHES_PER_SECOND,
                redirect_stdout=False,  # stdout is the run's output, never the line's
                redirect_stderr=False,
            )
            self._live.start()

    def close(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            with contextlib.suppress(OSError):  # a terminal that hung up (SIGHUP) takes no more
                live.stop()

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
        if event.type == "status" and event.status is not None and self.status != "stopping":
            self.status = event.status
        elif event.type == "child" and event.status == "running" and self._since is None:
            self._since = event.at
        elif event.type in ("activity", "output") and event.text:
            # Its last line as a terminal would leave it, without escapes or control
            # characters: they would tear the line apart.
            self.activity = views.last_line(event.text) or self.activity

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
        self._spinner.update(text=Text.assemble(*parts))
        return self._spinner


class _Line:
    """Rendered afresh at each refresh, so the elapsed time moves without events."""

    def __init__(self, progress: RunProgress) -> None:
        self._progress = progress

    def __rich__(self) -> RenderableType:
        return self._progress.render()
