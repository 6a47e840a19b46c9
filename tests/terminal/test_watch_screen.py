"""How `watch` draws a board: rows scrolled to the selected run, children under their run,
a child's escapes never reaching the screen."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console

from subagent_host.runs.state import ChildRun, Run, RunStatus
from subagent_host.terminal.watch_board import run_line
from subagent_host.terminal.watch_screen import View, screen
from subagent_host.values import RunKind

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def a_run(number: int, children: int = 1) -> Run:
    started = NOW - timedelta(seconds=number)
    return Run(
        run_id=f"{number:08d}" + "f" * 24,
        session_id="s",
        kind=RunKind.SINGLE if children == 1 else RunKind.PARALLEL,
        fingerprint="sha256:v1:" + "0" * 64,
        created_at=started,
        started_at=started,
        status=RunStatus.RUNNING,
        children=[
            ChildRun(index=i, backend="command", status=RunStatus.RUNNING, started_at=started)
            for i in range(children)
        ],
    )


def drawn(runs: list[Run], selected: str, height: int, activity: str = "") -> str:
    board = tuple(run_line(run, {}, {0: activity}) for run in runs)
    console = Console(width=120, height=height, file=io.StringIO(), record=True)
    console.print(screen(board, View(state_dir=Path("/state"), selected=selected), NOW, height))
    return console.export_text()


def test_the_rows_scroll_so_that_the_selected_run_shows_with_its_children() -> None:
    runs = [a_run(n) for n in range(30)]
    runs[25] = a_run(25, children=3)
    text = drawn(runs, runs[25].run_id, height=12)
    assert "› 00000025" in text
    assert "└ 2" in text
    assert "00000000" not in text  # scrolled past
    assert len(text.splitlines()) == 12
    top = drawn(runs, runs[1].run_id, height=12)
    assert "› 00000001" in top and "00000000" in top and "00000025" not in top


def test_a_childs_escapes_and_markup_are_shown_as_text_never_obeyed() -> None:
    runs = [a_run(1)]
    text = drawn(runs, runs[0].run_id, height=8, activity="\x1b[2J[bold]loud[/bold]\x07 done")
    assert "[bold]loud[/bold] done" in text
    assert "\x1b" not in text and "\x07" not in text
