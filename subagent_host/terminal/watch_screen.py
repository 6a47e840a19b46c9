"""How `watch` draws its board: a header, the runs with their children and the permissions
their interactive children wait on (or one run's output), and a footer with the keys and
the last message.

Pure rendering: given what was read (`watch_board`) and what the person chose, it
returns a rich renderable the size of the screen. `watch` draws it full-screen;
`scripts/watch-picture` prints it once into a recording console for the README.
Every text a child produced goes in as plain `Text` (never markup), its escapes removed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Final

import attrs
from rich import box
from rich.console import Group, RenderableType
from rich.layout import Layout
from rich.table import Table
from rich.text import Text

from subagent_host import SERVER_NAME
from subagent_host.runs.state import RunStatus
from subagent_host.terminal.interaction import SUMMARY_CHARS
from subagent_host.terminal.views import (
    duration,
    elapsed,
    plural,
    printable,
    run_tokens,
    short_id,
    shorten,
    size,
    status_text,
    tokens,
)
from subagent_host.terminal.watch_board import ChildLine, OutputTail, RunLine
from subagent_host.values.interaction import PendingPermission

SELECTED: Final = "›"
"""Marks the selected run (also without colours, where its highlight may not show)."""
SELECTED_STYLE: Final = "on grey23"
"""The selected run's row (without colours only its marker and bold id show it)."""
HEADER_LINES: Final = 1
FOOTER_LINES: Final = 2
LIST_KEYS: Final = "↑/↓ select   enter output   s stop   a/r allow/reject   q quit"
TAIL_KEYS: Final = "esc/enter back   ↑/↓ other run   s stop   a/r allow/reject   q quit"
ASKING: Final = "?"
"""Marks a permission an interactive child waits on, under its run."""
ANSWERED_BY_KEYS: Final = "a allow once · r reject"
PERMISSION_ID_CHARS: Final = 14
"""The most of a permission's id its row shows."""
"""Beside the selected run's oldest pending permission: the one `a` and `r` answer."""


@attrs.frozen
class View:
    """What the person looks at, besides the runs themselves."""

    state_dir: Path
    session_id: str | None = None
    selected: str | None = None
    """The selected run's id."""
    tail: OutputTail | None = None
    """Shown instead of the list while the output view is open."""
    message: str = ""
    """The last thing said (a stop's outcome): the footer's first line."""
    problem: str | None = None
    """Why there is nothing to show (no database yet): in place of the list."""


def screen(board: Sequence[RunLine], view: View, now: datetime, height: int) -> Layout:
    """The whole screen, `height` lines tall."""
    body_height = max(1, height - HEADER_LINES - FOOTER_LINES)
    if view.problem is not None:
        body: RenderableType = Text(view.problem, style="yellow")
    elif view.tail is not None:
        body = output_view(view.tail, now, body_height)
    else:
        body = run_table(board, view.selected, now, body_height)
    layout = Layout()
    layout.split_column(
        Layout(header(board, view, now), size=HEADER_LINES),
        Layout(body),
        Layout(footer(view), size=FOOTER_LINES),
    )
    return layout


def header(board: Sequence[RunLine], view: View, now: datetime) -> Table:
    running = sum(1 for line in board if line.run.status is RunStatus.RUNNING)
    left = Text.assemble(
        (f"{SERVER_NAME} watch", "bold"),
        "  ",
        (str(view.state_dir), "dim"),
        *(("  session ", (view.session_id, "bold")) if view.session_id else ()),
        "  ",
        plural(len(board), "run"),
        ", ",
        (f"{running} running", "bold cyan" if running else ""),
    )
    grid = Table.grid(expand=True)
    grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
    grid.add_column(justify="right", no_wrap=True)
    grid.add_row(left, Text(now.astimezone().strftime("%H:%M:%S"), style="dim"))
    return grid


def footer(view: View) -> Group:
    keys = TAIL_KEYS if view.tail is not None else LIST_KEYS
    return Group(
        Text(view.message, style="bold", no_wrap=True, overflow="ellipsis"),
        Text(keys, style="dim", no_wrap=True, overflow="ellipsis"),
    )


def run_table(board: Sequence[RunLine], selected: str | None, now: datetime, height: int) -> Table:
    """The runs, newest first, each followed by its children when it has several; the
    rows scrolled so that the selected run shows whole."""
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        expand=True,
        header_style="bold dim",
    )
    table.add_column("RUN", no_wrap=True, min_width=10)
    table.add_column("STATUS", no_wrap=True, min_width=9)
    table.add_column("ELAPSED", no_wrap=True, justify="right")
    table.add_column("WHAT", no_wrap=True, overflow="ellipsis", ratio=1, min_width=10)
    table.add_column("ACTIVITY", no_wrap=True, overflow="ellipsis", ratio=3, min_width=10)
    table.add_column("TOKENS", no_wrap=True, justify="right")
    table.add_column("CPU", no_wrap=True, justify="right")
    table.add_column("RSS", no_wrap=True, justify="right")
    rows = list(table_rows(board, selected, now))
    if not rows:
        table.add_row("", Text("no runs recorded yet", style="dim"))
        return table
    # The table's heading takes two lines (its rule included).
    visible = max(1, height - 2)
    chosen = [i for i, (run_id, _cells, _style) in enumerate(rows) if run_id == selected]
    start = 0
    if chosen and chosen[-1] >= visible:
        start = chosen[-1] - visible + 1
    for _run_id, cells, style in rows[start : start + visible]:
        table.add_row(*cells, style=style)
    return table


Row = tuple[str, list[Text], str]


def table_rows(board: Sequence[RunLine], selected: str | None, now: datetime) -> Iterator[Row]:
    for line in board:
        run = line.run
        is_selected = run.run_id == selected
        marker = SELECTED if is_selected else " "
        activity = line.children[0].activity if len(line.children) == 1 else children_summary(line)
        yield (
            run.run_id,
            [
                Text(f"{marker} {short_id(run.run_id)}", style="bold" if is_selected else ""),
                status_text(str(run.status)),
                Text(elapsed(run.started_at, run.ended_at, now)),
                Text(line.what),
                Text(activity, style="italic" if run.status is RunStatus.RUNNING else ""),
                Text(run_tokens(run)),
                Text(cpu(line.cpu_seconds)),
                Text(size(line.rss_bytes)),
            ],
            SELECTED_STYLE if is_selected else "",
        )
        if len(line.children) > 1:
            for position, child in enumerate(line.children):
                last = position == len(line.children) - 1
                yield run.run_id, child_cells(child, last, now), ""
        for position, permission in enumerate(line.pending):
            keyed = is_selected and position == 0
            yield run.run_id, permission_cells(permission, keyed), ""


def child_cells(line: ChildLine, last: bool, now: datetime) -> list[Text]:
    child = line.child
    return [
        Text(f"  {'└' if last else '├'} {child.index}", style="dim"),
        status_text(str(child.status)),
        Text(elapsed(child.started_at, child.ended_at, now), style="dim"),
        Text(line.what, style="dim"),
        Text(line.activity, style="italic" if child.status is RunStatus.RUNNING else "dim"),
        Text(tokens(child.usage), style="dim"),
        Text(cpu(line.cpu_seconds), style="dim"),
        Text(size(line.rss_bytes), style="dim"),
    ]


def permission_cells(permission: PendingPermission, keyed: bool) -> list[Text]:
    """A permission a child waits on: its id, the tool and what it would do, its answers;
    `keyed`: the one `a` and `r` answer (the selected run's oldest)."""
    options = ", ".join(option.kind.value for option in permission.options)
    said = f"{shorten(printable(permission.summary), SUMMARY_CHARS)}  [{options}]"
    # The id cut short: a CLI's own ids are long, and the keys answer it without typing it.
    shown_id = shorten(permission.permission_id, PERMISSION_ID_CHARS)
    return [
        Text(f"  {ASKING} {shown_id}", style="bold yellow" if keyed else "yellow"),
        Text("asks", style="bold yellow"),
        Text(""),
        Text(f"{permission.index}: {printable(permission.name)} ({permission.kind})"),
        Text.assemble(*(((f"{ANSWERED_BY_KEYS}  ", "bold"),) if keyed else ()), said),
        Text(""),
        Text(""),
        Text(""),
    ]


def children_summary(line: RunLine) -> str:
    """`2 running, 1 completed`: a run's children by status, in the order statuses go."""
    counts: dict[RunStatus, int] = {}
    for child in line.children:
        counts[child.child.status] = counts.get(child.child.status, 0) + 1
    return ", ".join(f"{counts[status]} {status}" for status in RunStatus if status in counts)


def cpu(seconds: float | None) -> str:
    return "-" if seconds is None else duration(seconds)


def output_view(tail: OutputTail, now: datetime, height: int) -> Group:
    """One run's output: each child's last lines (a heading per child when it has
    several), as many as the screen holds, the newest at the bottom."""
    run = tail.run
    title = Text.assemble(
        ("run ", "bold"),
        (short_id(run.run_id), "bold"),
        "  ",
        status_text(str(run.status)),
        "  ",
        elapsed(run.started_at, run.ended_at, now),
        *(("  ", (run.label, "dim")) if run.label else ()),
    )
    lines: list[Text] = []
    for child, text in tail.texts:
        if len(tail.texts) > 1:
            lines.append(
                Text.assemble(
                    (f"── child {child.index}", "bold dim"),
                    *((" ", (child.label, "dim")) if child.label else ()),
                    " ",
                    status_text(str(child.status)),
                )
            )
        if text:
            lines.extend(Text(part, no_wrap=True, overflow="ellipsis") for part in text.split("\n"))
        else:
            empty = "nothing streamed yet" if child.output is None else "no output"
            lines.append(Text(f"({empty})", style="dim italic"))
    room = max(1, height - 2)
    return Group(title, Text(""), *lines[-room:])
