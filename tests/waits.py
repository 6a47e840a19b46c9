"""Waits that tests share: each ends on an event, or after loop turns, never after a time."""

from __future__ import annotations

import asyncio
import os

import psutil


async def loop_turns(count: int = 10) -> None:
    """Let the loop run every ready callback, `count` times over (no clock involved):
    a task that is still not done after this is waiting on something that has not happened."""
    for _ in range(count):
        await asyncio.sleep(0)


async def still_running(processes: list[psutil.Process], timeout_s: float) -> list[int]:
    """Wait until every process has exited (a zombie has), each told by its pidfd, which
    works for processes that are not our children; the pids still running at `timeout_s`."""
    loop = asyncio.get_running_loop()
    exits: dict[int, asyncio.Future[None]] = {}
    pidfds: list[int] = []

    def exited(pidfd: int, future: asyncio.Future[None]) -> None:
        loop.remove_reader(pidfd)
        future.set_result(None)

    try:
        for process in processes:
            try:
                pidfd = os.pidfd_open(process.pid)
            except ProcessLookupError:
                continue  # exited and reaped already
            pidfds.append(pidfd)
            # Alive now means alive when the pidfd was opened: it is this process's.
            if process.is_running():
                exits[process.pid] = future = loop.create_future()
                loop.add_reader(pidfd, exited, pidfd, future)
        if exits:
            await asyncio.wait(exits.values(), timeout=timeout_s)
        return [pid for pid, future in exits.items() if not future.done()]
    finally:
        for pidfd in pidfds:
            loop.remove_reader(pidfd)
            os.close(pidfd)
