"""Waiting for a run within one tool call, with MCP progress while it lasts.

`spawn {waitSeconds}` and `wait` wait here: until the run is terminal, or waits for
input (each child still going is an interactive child between turns: nothing moves
until it is sent a message), or the time is up, whichever comes first. While they
wait, `report` is given one line when the wait starts, one per change of the run's or
a child's status, turn or permissions (its `run/event`s), and one
at least every `PROGRESS_EVERY_S` otherwise; the server turns them into
`notifications/progress` when the caller asked for progress. A wait that is cancelled
(`notifications/cancelled`, or the client going away) only stops waiting: the run goes
on, exactly as if the time were up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Final

from subagent_host.client import Host
from subagent_host.mcp_face.render import waits_for_input
from subagent_host.rpc.wire import EventWire, RunSnapshot
from subagent_host.values import TERMINAL
from subagent_host.values.choices import Phase
from subagent_host.values.events import ChildEvent, PermissionEvent, StatusEvent, TurnEvent

PROGRESS_EVERY_S: Final = 4.0
"""The longest silence while waiting: under the 5 s the face promises (protocol.md §22),
so that a client that times out idle calls hears from it in time."""
CHANGES: Final = frozenset({"status", "child", "turn", "permission"})
"""The events that change a status, a turn, or what a run waits on: each one is reported."""

Report = Callable[[str], Awaitable[None]]
"""Sends one line of progress (a no-op when the caller gave no progress token)."""


async def wait_for_run(host: Host, run: RunSnapshot, seconds: float, report: Report) -> RunSnapshot:
    """The run's snapshot once it is terminal or waits for input, or when `seconds` have
    passed; `run` is its snapshot when the wait begins (as `spawn` or `status` answered it)."""
    if run.status in TERMINAL or waits_for_input(run) or seconds <= 0:
        return run
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    changes: asyncio.Queue[EventWire | None] = asyncio.Queue()
    follower = asyncio.create_task(_follow(host, run, changes))
    try:
        await report(f"run {run.run_id}: {run.status}, waiting up to {seconds:.0f} s")
        while (left := deadline - loop.time()) > 0:
            try:
                event = await asyncio.wait_for(changes.get(), min(left, PROGRESS_EVERY_S))
            except TimeoutError:
                if deadline - loop.time() > 0:
                    waited = seconds - (deadline - loop.time())
                    await report(f"run {run.run_id}: still going after {waited:.0f} s")
                continue
            if event is None:  # the run is terminal (or the connection ended: status says)
                break
            await report(_change(run.run_id, event))
            if isinstance(event.event, TurnEvent) and event.event.phase is Phase.END:
                now = await host.status(run.run_id)
                if waits_for_input(now):
                    return now
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
    return await host.status(run.run_id)


async def _follow(host: Host, run: RunSnapshot, changes: asyncio.Queue[EventWire | None]) -> None:
    """Queue the run's status changes after `run`'s, then None once it is terminal."""
    try:
        async for event in host.events(run.run_id, since=run.last_seq):
            if event.type in CHANGES:
                changes.put_nowait(event)
    finally:
        changes.put_nowait(None)


def _change(run_id: str, event: EventWire) -> str:
    match event.event:
        case ChildEvent(index=index, status=status):
            return f"run {run_id}: child {index} {status}"
        case StatusEvent(status=status):
            return f"run {run_id}: {status}"
        case TurnEvent(index=index, phase=phase):
            return f"run {run_id}: child {index} turn {phase}"
        case PermissionEvent(index=index, stage=stage, name=name, summary=summary):
            return f"run {run_id}: child {index} permission {stage}: {name} {summary}"
        case other:
            return f"run {run_id}: {other.type}"
