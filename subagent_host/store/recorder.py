"""Record runs in the store as they change: one write per turn of the loop, in order.

The run state machine calls the recorder for every event. What changed during one turn
of the event loop is serialised once at the end of that turn (the objects keep
changing) and handed to the store's thread as one transaction; the loop never
waits for the disk. `durable()` waits until everything recorded so far is
committed: a reply that names a run is sent only after the run is on disk, and
`durable(run)` raises `RecordFailed` when the newest write carrying that run
failed, so no success is ever answered for a run the store does not hold.

A write that pruned a session's oldest runs (`--history-limit`) names them, and
`on_pruned` is told on the loop — before anyone waiting for that write resumes —
so the memory of this server forgets them as the disk did.

The writes waiting for the disk are bounded too: a child streaming faster than
the disk takes its events would otherwise queue them in memory without end.
Above STORE_BACKLOG_BYTES of events waiting, the recorder says it is full
(app.py then holds streamed children back, as for a slow client) and says so
again once the backlog is below STORE_BACKLOG_LOW_BYTES.

A new task-mode run is held off the disk until it ends, for HOLD_S at most:
one that ends within its first turns of the loop (`true`) is then one
transaction, not one at its creation, one when its child started and one at
its end. Only a run whose id is reserved on disk is held (run_ids.py), so a
server killed meanwhile leaves the next one the marker of its processes; and
whoever waits for the disk (`durable`) ends every hold first, so a reply or a
lookup never misses a held run.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import json
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from typing import Final

from subagent_host.errors import RecordFailed
from subagent_host.runs.state import Run, RunEvent
from subagent_host.store import writes
from subagent_host.store.database import Database
from subagent_host.store.rows import RunRow, StoredEvent, run_row, stored_event
from subagent_host.store.run_ids import RunIds, meta_key
from subagent_host.values import TASK_MODE
from subagent_host.values.error_data import RunRef
from subagent_host.values.json_values import JsonObject

STORE_BACKLOG_BYTES: Final = 4 * 1024 * 1024
STORE_BACKLOG_LOW_BYTES: Final = 1024 * 1024
# How long a new task-mode run may go unwritten while it has not ended.
HOLD_S: Final = 0.05


class Recorder:
    def __init__(
        self,
        store: Database,
        instance_id: str,
        history_limit: int,
        run_ids: RunIds | None = None,
    ) -> None:
        self._store = store
        self._run_ids = run_ids
        """Which run ids are reserved on disk; without it, no run is held (run_ids.py)."""
        self._instance_id = instance_id
        self._history_limit = history_limit
        self._pending: dict[str, tuple[Run, list[RunEvent | StoredEvent]]] = {}
        # Each with its sealing (stored JSON and digest), done once: in a spare turn of
        # the loop or when its run is written, whichever comes first.
        self._projections: list[tuple[str, int, Callable[[], tuple[str, str]]]] = []
        self._sealing_scheduled = False
        self._extras = writes.Extras()
        self._scheduled = False
        self._last_write: concurrent.futures.Future[object] | None = None
        # Writes not committed yet, with the bytes of events each carries.
        self._in_flight: collections.deque[tuple[concurrent.futures.Future[object], int]] = (
            collections.deque()
        )
        self._in_flight_bytes = 0
        self.full = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # The write whose commit will wake the loop to look at the backlog again.
        self._awaited: concurrent.futures.Future[object] | None = None
        self._watchers: list[tuple[Callable[[], None], Callable[[], None]]] = []
        # Ids of runs whose newest write failed. Changed on the store's thread
        # only; the loop reads it once the write it waited for is done.
        self._unwritten: set[str] = set()
        # Runs being given up on after a failed write (see `unrecorded`).
        self._unrecorded: set[str] = set()
        self.on_pruned: Callable[[Sequence[str]], None] = lambda _run_ids: None
        """Told the ids of the runs each write deleted (set once the orchestrator exists)."""
        # New task-mode runs not written yet, each with the timer that ends its hold.
        self._held: dict[str, asyncio.TimerHandle] = {}

    def watch_backlog(self, full: Callable[[], None], drained: Callable[[], None]) -> None:
        """Call `full` when too many events wait for the disk, `drained` once few do."""
        self._watchers.append((full, drained))

    def __call__(self, run: Run, event: RunEvent) -> None:
        """The run state machine's listener: note the run and its new event."""
        if run.run_id in self._unrecorded:
            return
        pending = self._pending.get(run.run_id)
        if pending is None:
            self._pending[run.run_id] = (run, [event])
        else:
            pending[1].append(event)
        if event.seq == 1 and run.mode == TASK_MODE and self._may_hold(run.run_id):
            self._hold(run.run_id)
        self._schedule()

    def _may_hold(self, run_id: str) -> bool:
        """Only a run whose id is reserved on disk: the next server finds its children."""
        return self._run_ids is not None and self._run_ids.covered(run_id)

    def _hold(self, run_id: str) -> None:
        """Keep a new task-mode run off the disk until it ends, or for HOLD_S at most.

        A run that ends within a few turns of the loop (`true`) then costs one
        write, its end, instead of one at its creation, one when its child
        started and one at its end. Whoever waits for the disk (`durable`: a
        reply or a lookup) ends every hold first.
        """
        loop = asyncio.get_running_loop()
        self._held[run_id] = loop.call_later(HOLD_S, self._release, run_id)

    def _release(self, run_id: str) -> None:
        handle = self._held.pop(run_id, None)
        if handle is not None:
            handle.cancel()
            self._schedule()

    def projection(self, run: Run, index: int, sealing: Callable[[], tuple[str, str]]) -> None:
        """Record one child's launch projection (with the run): `sealing` gives its stored
        JSON and digest.

        Sealed one turn of the loop later than the next: a launch records its
        projections before its first child is started in the next turn, and
        sealing them (canonical JSON, twice, and a digest) is then done while
        that child runs, not before it starts. A write of the run that comes
        first seals them itself: a run is never written without them. The
        events a held run has by then (queued, running) are encoded in that
        same spare turn, so the write at its end encodes only its last events.
        """
        self._projections.append((run.run_id, index, functools.cache(sealing)))
        self.touch(run)
        if not self._sealing_scheduled:
            self._sealing_scheduled = True
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_soon, self._seal_pending)

    def _seal_pending(self) -> None:
        self._sealing_scheduled = False
        for _, _, sealing in self._projections:
            sealing()
        for run_id in self._held:
            events = self._pending[run_id][1]
            events[:] = [e if isinstance(e, StoredEvent) else stored_event(e) for e in events]

    def workflow(self, run: Run, definition: JsonObject) -> None:
        """Record a workflow's definition (its item templates, no environment values)."""
        self._extras.workflows.append((run.run_id, json.dumps(definition, sort_keys=True)))
        self.touch(run)

    def text(self, run: Run, index: int, text: str) -> None:
        """Record a workflow child's final text, for the steps after it on a resume."""
        self._extras.texts.append((run.run_id, index, text))
        self.touch(run)

    def touch(self, run: Run) -> None:
        """Note a change that came without an event (a pid, resources)."""
        if run.run_id in self._unrecorded:
            return
        self._pending.setdefault(run.run_id, (run, []))
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._write)

    def _write(self) -> None:
        self._scheduled = False
        held = self._held
        for run_id in [run_id for run_id in held if self._pending[run_id][0].is_terminal]:
            held.pop(run_id).cancel()  # ended: written now, with its end
        if len(self._pending) == len(held):
            return
        if held:
            ready = {k: v for k, v in self._pending.items() if k not in held}
            self._pending = {k: v for k, v in self._pending.items() if k in held}
            projections, extras = self._split(held)
        else:
            ready, self._pending = self._pending, {}
            projections, extras = _sealed(self._projections), self._extras
            self._projections, self._extras = [], writes.Extras()
        rows = [run_row(run, events) for run, events in ready.values()]
        reservation = self._reservation(ready)
        if reservation is not None:
            extras.reservation = reservation[1]
        self._last_write = write = self._store.submit(
            self._save, rows, projections, extras, reservation[0] if reservation else None
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
            deleted = done.result()  # `_save`'s list of run ids
            if isinstance(deleted, list) and deleted:
                loop.call_soon_threadsafe(self.on_pruned, deleted)

        write.add_done_callback(pruned)
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
        oldest = self._in_flight[0][0] if self._in_flight else None
        if self.full and oldest is not None and oldest is not self._awaited:
            # Nothing else wakes the loop when a write is committed: the oldest one
            # does, once (every write made while full calls this again).
            self._loop = asyncio.get_running_loop()
            self._awaited = oldest
            oldest.add_done_callback(self._committed)

    def _committed(self, _: object) -> None:
        """On the store's thread: look at the backlog again, on the loop."""
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody to tell
            self._loop.call_soon_threadsafe(self._check_backlog)

    def _save(
        self,
        rows: list[RunRow],
        projections: list[tuple[str, int, str, str]],
        extras: writes.Extras,
        generation: int | None = None,
    ) -> list[str]:
        """On the store's thread: write, and note which runs' newest write failed.

        Returns the ids of the runs the write pruned (see `_write`).
        """
        saved = writes.save(
            self._store, self._instance_id, rows, self._history_limit, projections, extras
        )
        written = {row.run_id for row in rows} - set(saved.failed)
        # One assignment: the loop never sees a run of this batch half-updated.
        self._unwritten = (self._unwritten - written) | set(saved.failed)
        if saved.reserved and generation is not None and self._run_ids is not None:
            self._run_ids.confirm(generation)
        return saved.pruned

    def _reservation(self, written: Iterable[str]) -> tuple[int, tuple[str, str]] | None:
        """The run ids to reserve with this write, if that changed (its batch number too)."""
        if self._run_ids is None:
            return None
        for run_id in written:
            self._run_ids.written(run_id)
        found = self._run_ids.reservation()
        if found is None:
            return None
        generation, ids = found
        return generation, (meta_key(self._instance_id), ids)

    def _split(self, held: Container[str]) -> tuple[list[tuple[str, int, str, str]], writes.Extras]:
        """Take what goes with this write (all but the held runs'), keep the rest."""
        extras = self._extras
        taken = writes.Extras(
            workflows=[w for w in extras.workflows if w[0] not in held],
            texts=[t for t in extras.texts if t[0] not in held],
        )
        self._extras = writes.Extras(
            workflows=[w for w in extras.workflows if w[0] in held],
            texts=[t for t in extras.texts if t[0] in held],
        )
        projections = _sealed(p for p in self._projections if p[0] not in held)
        self._projections = [p for p in self._projections if p[0] in held]
        return projections, taken

    async def durable(self, run: Run | None = None) -> None:
        """Return once everything recorded so far is committed (or its write failed).

        With `run`: raise `RecordFailed` if the newest write that carried it failed.
        """
        for handle in self._held.values():
            handle.cancel()
        self._held.clear()
        if self._scheduled or self._pending:
            self._write()
        if self._last_write is not None and not self._last_write.done():
            # A future of its own: a cancelled waiter leaves the write alone.
            await _committed(self._last_write)
        if run is not None and run.run_id in self._unwritten:
            raise RecordFailed(
                f"run {run.run_id} could not be written to the run history",
                data=RunRef(run.run_id),
            )

    @contextlib.contextmanager
    def unrecorded(self, run: Run) -> Iterator[None]:
        """Write nothing of `run` while inside (its children are being ended after a
        failed write: the store keeps what it last held of it, or nothing)."""
        self._unrecorded.add(run.run_id)
        if (handle := self._held.pop(run.run_id, None)) is not None:
            handle.cancel()
        try:
            yield
        finally:
            self._unrecorded.discard(run.run_id)
            self._pending.pop(run.run_id, None)
            self._projections = [p for p in self._projections if p[0] != run.run_id]
            self._extras.workflows = [w for w in self._extras.workflows if w[0] != run.run_id]
            self._extras.texts = [t for t in self._extras.texts if t[0] != run.run_id]


def _sealed(
    projections: Iterable[tuple[str, int, Callable[[], tuple[str, str]]]],
) -> list[tuple[str, int, str, str]]:
    """Projections as a write carries them: run id, index, stored JSON, digest."""
    return [(run_id, index, *sealing()) for run_id, index, sealing in projections]


def _committed(write: concurrent.futures.Future[object]) -> asyncio.Future[None]:
    """A future of the loop, done once `write` is (committed, failed or cancelled).

    The store's thread wakes the loop once, straight into this future: no
    `wrap_future` copying the write's outcome and no `asyncio.wait` around it,
    each of which would cost the waiting reply another turn of the loop. Added
    after `_write`'s `pruned` callback, so the runs a write pruned are still
    forgotten before its waiter resumes.
    """
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody to wake
            loop.call_soon_threadsafe(_set_done, waiter)

    write.add_done_callback(wake)
    return waiter


def _set_done(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # a cancelled waiter is done already
        waiter.set_result(None)
