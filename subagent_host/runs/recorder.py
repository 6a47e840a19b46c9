"""Record runs in the store as they change: one write per turn of the loop, in order.

The run book calls the recorder for every event. What changed during one turn
of the event loop is serialised once at the end of that turn (the objects keep
changing) and handed to the store's thread as one transaction; the loop never
waits for the disk. `durable()` waits until everything recorded so far is
committed: a reply that names a run is sent only after the run is on disk.

A write that pruned a session's oldest runs (`--history-limit`) names them, and
`on_pruned` is told on the loop — before anyone waiting for that write resumes —
so the memory of this server forgets them as the disk did.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Callable, Sequence
from typing import Any

from subagent_host.runs import history
from subagent_host.runs.projection import seal
from subagent_host.runs.state import Run, RunEvent
from subagent_host.runs.store import Store


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
        self.on_pruned: Callable[[Sequence[str]], None] = lambda _run_ids: None
        """Told the ids of the runs each write deleted (set once the run manager exists)."""

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
        self._last_write = write = self._store.submit(
            history.save,
            self._store,
            self._instance_id,
            rows,
            self._history_limit,
            projections,
            extras,
        )
        loop = asyncio.get_running_loop()

        def pruned(done: concurrent.futures.Future[object]) -> None:
            # On the store's thread, as the write completes. Registered here, before
            # anyone can wrap this write to await it (`durable`, `Store.call` after
            # it): a future's callbacks run in the order they were added, so this
            # one is queued on the loop ahead of every waiter's wake-up, and the
            # runs are forgotten before a reply that waited for the write is sent —
            # a `status` sent after that reply finds them gone. The loop is woken
            # only when something was pruned.
            if done.cancelled() or done.exception() is not None:
                return
            deleted = done.result()  # history.save's list of run ids
            if isinstance(deleted, list) and deleted:
                loop.call_soon_threadsafe(self.on_pruned, deleted)

        write.add_done_callback(pruned)

    async def durable(self) -> None:
        """Return once everything recorded so far is committed (or its write failed)."""
        if self._scheduled:
            self._write()
        if self._last_write is not None and not self._last_write.done():
            # asyncio.wait never cancels what it waits for: a cancelled waiter
            # leaves the write alone.
            await asyncio.wait([asyncio.wrap_future(self._last_write)])
