"""A run's controls while it runs: its stop request (the first one wins), what it streams, and
when it is done or detached."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from subagent_host.runs.live_child import EarlyMessage, LiveChild


@attrs.define
class RunControl:
    """A run's stop request (first wins) and its completion."""

    grace_s: float
    stream: bool = False
    """Send the children's events as they happen: a command's output, an agent's
    normalized events (`message`, `tool`, `usage`)."""
    raw_output: bool = False
    """With `stream`, an agent's raw output lines as `output` events (its stderr as `stderr`
    events) too (`stream: "raw"`)."""
    stop_reason: str | None = None
    stopping: asyncio.Future[None] = attrs.Factory(
        lambda: asyncio.get_running_loop().create_future()
    )
    """Done once a stop was requested (never cancelled)."""
    done: asyncio.Event = attrs.Factory(asyncio.Event)
    reply_due: asyncio.Event = attrs.Factory(asyncio.Event)
    """Set when a `task`-mode request waiting on the run is to be answered: the run is
    done, or the client handed it to the background (`run/detach`)."""
    task: asyncio.Task[None] | None = None
    live: dict[int, LiveChild] = attrs.Factory(dict)
    early: dict[int, list[EarlyMessage]] = attrs.Factory(dict)
    """Messages sent to its interactive children before they started, by index: said to
    each once it has, dropped if it never does."""
    """Its driven children while they run, by index: what `run/send`, `run/interrupt`,
    `run/close` and `run/permit` reach (runs/live_child.py)."""
