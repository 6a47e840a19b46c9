"""The live line of `subagent-host run`: what it shows of a run's events."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console

from subagent_host.rpc.wire import EventWire
from subagent_host.terminal.progress import RunProgress
from subagent_host.terminal.run_live import LiveOutput
from subagent_host.values.events import EVENT_CLASSES, Phase, ToolKind


def event(seq: int, type_: str, **fields: Any) -> EventWire:
    payload = EVENT_CLASSES[type_](**fields)
    return EventWire(run_id="r" * 32, seq=seq, at=datetime.now(UTC), event=payload)


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


def test_live_output_prints_whole_lines_a_tool_line_and_a_responses_last_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    live = LiveOutput(RunProgress(Console(file=None, force_terminal=False)))
    live.take(event(1, "message", index=0, text="Hel"))
    assert capsys.readouterr().out == ""  # half a line waits for its end
    live.take(event(2, "message", index=0, text="lo\nI will l"))
    assert capsys.readouterr().out == "Hello\n"
    live.take(
        event(
            3,
            "tool",
            index=0,
            phase=Phase.START,
            tool_id="t1",
            kind=ToolKind.EXECUTE,
            name="bash",
            summary="ls",
        )
    )
    assert capsys.readouterr().out == "I will l\n› execute: ls\n"  # its text before the call
    live.take(
        event(
            4,
            "tool",
            index=0,
            phase=Phase.END,
            tool_id="t1",
            kind=ToolKind.EXECUTE,
            name="bash",
            is_error=False,
        )
    )
    live.take(event(5, "message", index=0, text="Done", final=True))
    assert capsys.readouterr().out == "Done\n"
    live.take(event(6, "output", index=0, text="no newline"))
    live.flush()
    assert capsys.readouterr().out == "no newline\n" and live.printed
