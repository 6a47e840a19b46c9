"""The live line of `subagent-host run`: what it shows of a run's events."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich.console import Console

from subagent_host.rpc.wire import EventWire
from subagent_host.terminal.progress import RunProgress


def event(seq: int, kind: str, **fields: object) -> EventWire:
    return EventWire(run_id="r" * 32, seq=seq, type=kind, at=datetime.now(UTC), **fields)  # type: ignore[arg-type]


def test_the_line_shows_a_commands_latest_output_line_as_a_terminal_would_leave_it() -> None:
    progress = RunProgress(Console(file=None, force_terminal=False))
    text = "\x1b[31mfirst\x1b[0m\nsecond 10%\rsecond 20%\r\n\x07\n"
    progress.event(event(3, "output", index=0, text=text))
    assert progress.activity == "second 20%"
    progress.event(event(4, "activity", index=0, text="tool bash"))
    assert progress.activity == "tool bash"


def test_once_stopping_the_line_says_so_whatever_the_events_say() -> None:
    progress = RunProgress(Console(file=None, force_terminal=False))
    progress.event(event(1, "status", status="running"))
    progress.stopping()
    progress.event(event(2, "status", status="cancelled"))
    assert progress.status == "stopping"
    shown = Console(record=True, width=100, file=io.StringIO())
    shown.print(progress.render())
    assert "stopping" in shown.export_text()


def test_nothing_is_drawn_when_stderr_is_not_a_terminal() -> None:
    # Under pytest stderr is captured: not a terminal, even when rich is told it is one.
    progress = RunProgress(Console(force_terminal=True))
    assert not progress.shown
    with progress:
        pass
