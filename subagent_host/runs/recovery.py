"""Start-up of a server process on a state directory: register it, recover what dead ones left.

RELIABILITY.md ("SQLite for run history"): each server process has an id and
its pid and start time on record. At start, in one immediate transaction, runs
of server processes that are gone become `interrupted` exactly once; then the
processes those runs left — recognised by their run marker, and a recorded pid
only together with its start time — are ended with the stop sequence.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Final

import psutil

from subagent_host.backends.supervisor import Supervisor
from subagent_host.runs import history
from subagent_host.runs.state import RunBook, utc_now
from subagent_host.runs.store import Store

logger = logging.getLogger(__name__)

# psutil's start times have clock-tick resolution (10 ms).
START_TOLERANCE_S: Final = 0.01


async def start_instance(
    store: Store, supervisor: Supervisor, grace_ms: int
) -> tuple[str, asyncio.Task[int] | None]:
    """Register this process; mark dead servers' runs interrupted; end their leftovers.

    Returns this instance's id and the task ending leftover processes (None if
    there were no interrupted runs); the server awaits it before it exits.
    """
    instance = uuid.uuid4().hex
    me = psutil.Process()
    await store.call(
        history.register_instance, store, instance, me.pid, me.create_time(), utc_now()
    )
    interrupted, leftovers = await store.call(
        history.recover, store, instance, process_is_alive, RunBook()
    )
    if not interrupted:
        return instance, None
    logger.warning("%d runs of an ended server process were marked interrupted", len(interrupted))
    recorded = [(left.pid, left.create_time) for left in leftovers]
    task = asyncio.create_task(
        supervisor.end_strays(frozenset(interrupted), recorded, grace_ms / 1000)
    )
    return instance, task


def process_is_alive(pid: int, create_time: float) -> bool:
    """True if `pid` still names the process that started at `create_time`."""
    try:
        return abs(psutil.Process(pid).create_time() - create_time) < START_TOLERANCE_S
    except psutil.Error:
        return False
