"""Hold a run's stop request (the first one wins) and say when the run is done."""

from __future__ import annotations

import asyncio

import attrs


@attrs.define
class RunControl:
    """A run's stop request (first wins) and its completion."""

    grace_s: float
    stream: bool = False
    stop_reason: str | None = None
    stopping: asyncio.Future[None] = attrs.Factory(
        lambda: asyncio.get_running_loop().create_future()
    )
    """Done once a stop was requested (never cancelled)."""
    done: asyncio.Event = attrs.Factory(asyncio.Event)
    task: asyncio.Task[None] | None = None
