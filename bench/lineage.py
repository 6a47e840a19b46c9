"""What a benchmark started: its descendants, remembered while it runs.

A process that outlives its parent is handed to init (or a subreaper) and is no longer
a descendant, so the lineage is looked at while the benchmark runs (`look`, and
`watch` in the background) and each process seen is remembered by pid and start time
(a pid reused by another program is not ours). Processes the benchmark did not start,
such as other jobs of the shell that started it, are never counted, whenever they began.
"""

from __future__ import annotations

import asyncio
import contextlib

import psutil


class Lineage:
    """The processes a benchmark started and theirs, seen at any look."""

    def __init__(self) -> None:
        self._seen: dict[int, float] = {}  # pid -> its start time

    def look(self) -> None:
        """Remember every descendant alive now."""
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                self._seen.setdefault(child.pid, child.create_time())

    def alive(self) -> list[int]:
        """The pids of what it started that still exist (a zombie not yet reaped too)."""
        self.look()
        left = []
        for pid, started in self._seen.items():
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).create_time() == started:
                    left.append(pid)
        return sorted(left)

    async def watch(self, every_s: float) -> None:
        """Look every `every_s` seconds until cancelled: a process that was started and
        orphaned between two looks is missed, which a short period makes unlikely and the
        marker sweep covers."""
        while True:
            await asyncio.to_thread(self.look)
            await asyncio.sleep(every_s)  # nothing announces a new process: a poll it is
