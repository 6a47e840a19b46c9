"""Record runs in the store as they change: one write per turn of the loop, in order.

The run book calls the recorder for every event. What changed during one turn
of the event loop is serialised once at the end of that turn (the objects keep
changing) and handed to the store's thread as one transaction; the loop never
waits for the disk. `durable()` waits until everything recorded so far is
committed: a reply that names a run is sent only after the run is on disk.

The writes waiting for the disk are bounded too: a child streaming faster than
the disk takes its events would otherwise queue them in memory without end.
Above STORE_BACKLOG_BYTES of events waiting, the recorder says it is full
(app.py then holds streamed children back, as for a slow client) and says so
again once the backlog is below STORE_BACKLOG_LOW_BYTES.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import json
from collections.abc import Callable
from typing import Any, Final

from subagent_host.runs import history
from subagent_host.runs.projection import seal
from subagent_host.runs.state import Run, RunEvent
from subagent_host.runs.store import Store

STORE_BACKLOG_BYTES: Final = 4 * 1024 * 1024
STORE_BACKLOG_LOW_BYTES: Final = 1024 * 1024


class Recorder:
    def __init__(self, store: Store, instance_id: str, history_limit: int) -> None:
        self._store = store
        self._instance_id = instance_id
        self._history_limit = history_limit
        self._pending: dict[str, tuple[Run, list[RunEvent]]] = {}
        self._projections: list[tuple[str, int, str, str]] = []
        self._extras = history.Extras()
        self._scheduled = False
        self._last_write: concurrent.futures.Future[object] | None = None
        # Writes not committed yet, with the bytes of events each carries.
        self._in_flight: collections.deque[tuple[concurrent.futures.Future[object], int]] = (
            collections.deque()
        )
        self._in_flight_bytes = 0
        self.full = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watchers: list[tuple[Callable[[], None], Callable[[], None]]] = []

    def watch_backlog(self, full: Callable[[], None], drained: Callable[[], None]) -> None:
        """Call `full` when too many events wait for the disk, `drained` once few do."""
        self._watchers.append((full, drained))

    def __call__(self, run: Run, event: RunEvent) -> None:
        """The run book's listener: note the run and its new event."""
        pending = self._pending.get(run.run_id)
        if pending is None:
            self._pending[run.run_id] = (run, [event])
        else:
            pending[1].append(event)
        self._schedule()

    def projections(self, run: Run, projections: list[dict[str, Any]]) -> None:
        """Record each child's launch projection (with the run, in the same write)."""
        for index, projection in enumerate(projections):
            stored, digest = seal(projection)
            self._projections.append((run.run_id, index, stored, digest))
        self.touch(run)

    def projection(self, run: Run, index: int, projection: dict[str, Any]) -> None:
        """Record one child's launch projection (a workflow's children come step by step)."""
        stored, digest = seal(projection)
        self._projections.append((run.run_id, index, stored, digest))
        self.touch(run)

    def workflow(self, run: Run, definition: dict[str, Any]) -> None:
        """Record a workflow's definition (its item templates, no environment values)."""
        self._extras.workflows.append((run.run_id, json.dumps(definition, sort_keys=True)))
        self.touch(run)

    def text(self, run: Run, index: int, text: str) -> None:
        """Record a workflow child's final text, for the steps after it on a resume."""
        self._extras.texts.append((run.run_id, index, text))
        self.touch(run)

    def touch(self, run: Run) -> None:
        """Note a change that came without an event (a pid, resources)."""
        self._pending.setdefault(run.run_id, (run, []))
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._write)

    def _write(self) -> None:
        self._scheduled = False
        if not self._pending:
            return
        rows = [history.run_row(run, events) for run, events in self._pending.values()]
        projections, extras = self._projections, self._extras
        self._pending.clear()
        self._projections = []
        self._extras = history.Extras()
        self._last_write = self._store.submit(
            history.save,
            self._store,
            self._instance_id,
            rows,
            self._history_limit,
            projections,
            extras,
        )
        size = sum(len(record) for row in rows for _, record in row.events)
        if size:
            self._in_flight.append((self._last_write, size))
            self._in_flight_bytes += size
            self._check_backlog()

    def _check_backlog(self) -> None:
        while self._in_flight and self._in_flight[0][0].done():
            self._in_flight_bytes -= self._in_flight.popleft()[1]
        if not self.full and self._in_flight_bytes > STORE_BACKLOG_BYTES:
            self.full = True
            for full, _ in self._watchers:
                full()
        elif self.full and self._in_flight_bytes < STORE_BACKLOG_LOW_BYTES:
            self.full = False
            for _, drained in self._watchers:
                drained()
        if self.full:
            # Nothing else wakes the loop when a write is committed: the oldest one does.
            self._loop = asyncio.get_running_loop()
            self._in_flight[0][0].add_done_callback(self._committed)

    def _committed(self, _: object) -> None:
        """On the store's thread: look at the backlog again, on the loop."""
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody to tell
            self._loop.call_soon_threadsafe(self._check_backlog)

    async def durable(self) -> None:
        """Return once everything recorded so far is committed (or its write failed)."""
        if self._scheduled:
            self._write()
        if self._last_write is not None and not self._last_write.done():
            # asyncio.wait never cancels what it waits for: a cancelled waiter
            # leaves the write alone.
            await asyncio.wait([asyncio.wrap_future(self._last_write)])
