"""The client library (`subagent_host.client.Host`) over a harness server's own pipes.

For tests that call methods and follow runs rather than check bytes on the wire:
every message the client receives is checked as `ServerProcess.receive` checks
what it reads (its run ids are recorded for `running_server`'s leftover check,
its snapshots held to the status table), in `observe`, the one place to add a
check of every message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from subagent_host.client import Host
from subagent_host.values.events import ChildEvent
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    ServerProcess,
    _run_ids_in,
    _snapshots_in,
    assert_snapshot_table,
)


@contextlib.asynccontextmanager
async def client_of(server: ServerProcess) -> AsyncIterator[Host]:
    """A `Host` on the server's stdin and stdout. On exit it closes the server's stdin,
    and the server must then exit with status 0."""
    stdout, stdin = server.proc.stdout, server.proc.stdin
    assert stdout is not None and stdin is not None

    def observe(message: Any) -> None:
        server.run_ids.update(_run_ids_in(message))
        for snapshot in _snapshots_in(message):
            assert_snapshot_table(snapshot)

    async with Host.connect(stdout, stdin, framing=server.framing, on_message=observe) as host:
        yield host
    assert await asyncio.wait_for(server.proc.wait(), EXIT_TIMEOUT_S) == 0


async def until_children(host: Host, run_id: str, holds: Callable[[list[str]], bool]) -> None:
    """Follow the run's `child` events (bounded) until `holds` is true of its children's
    statuses in index order (those that have had an event)."""
    children: dict[int, str] = {}
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        async for event in host.events(run_id):
            if isinstance(event.event, ChildEvent):
                children[event.event.index] = event.event.status
                if holds([children[index] for index in sorted(children)]):
                    return
    raise AssertionError(f"run {run_id} ended first; its children: {children}")
