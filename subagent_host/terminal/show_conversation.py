"""What `show` adds for a run with interactive children (protocol.md §23): the end of
its conversation (its newest `turn`, `input` and `permission` events, in the words of
`terminal/interaction.py`), and while it runs, the permissions its children wait on with
the command that answers one. A module of its own: a plain `show` never loads it.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from subagent_host import SERVER_NAME
from subagent_host.runs.state import Run, RunEvent
from subagent_host.terminal import views
from subagent_host.terminal.interaction import SAID, event_line, pending_line, pending_permissions
from subagent_host.values.events import PermissionEvent


def conversation(out: Console, run: Run, said: Sequence[RunEvent], shown_at_most: int) -> None:
    """The newest of an interactive run's turns, live messages and permissions."""
    shown = [(e.payload.index, event_line(e.payload)) for e in said if isinstance(e.payload, SAID)]
    if not shown:
        return
    out.print()
    heading = "conversation" + (
        f" (last {len(shown)} events)" if len(shown) >= shown_at_most else ""
    )
    out.print(Text(heading, style="bold"))
    several = len(run.children) > 1
    for index, line in shown:
        out.print(
            f"{f'[{index}] ' if several else ''}{line}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def pending(out: Console, run: Run, asked: Sequence[RunEvent]) -> None:
    """The permissions the run's children wait on now (from its `permission` events), and
    how to answer one."""
    waiting = pending_permissions(
        e.payload for e in asked if isinstance(e.payload, PermissionEvent)
    )
    if not waiting:
        return
    out.print()
    out.print(Text("pending permissions", style="bold yellow"))
    for permission in waiting:
        out.print(f"  {pending_line(permission)}", markup=False, highlight=False, soft_wrap=True)
    first = waiting[0].permission_id
    out.print(
        Text(
            f"answer: {SERVER_NAME} permit {views.short_id(run.run_id)} {first} allow|reject",
            style="dim",
        ),
        soft_wrap=True,
    )
