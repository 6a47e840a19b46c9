"""Run ids drawn from a reservation on disk, so a run may be written late and still be found.

A new task-mode run is written once, with its end, when it ends within its
first moments (recorder.py). Its child runs meanwhile; should the server be
killed then, the next server must still end the child's processes. They carry
the run's id as their marker (backends/supervisor.py), so the id must be on
disk before the child starts: this server keeps a batch of ids it will hand
out in the `meta` table, written with an earlier write (the first batch with
the server's own registration), and recovery ends the processes marked with
a dead server's reserved ids that no stored run has (instances.py).

Only an id whose reservation is committed is `covered`: a run with any other
id is written at once, as before.
"""

from __future__ import annotations

import collections
import json
import uuid
from typing import Final

BATCH: Final = 32
"""Ids reserved at a time; a new batch is added when half of the last one is used."""

META_KEY_PREFIX: Final = "reserved-run-ids:"


def meta_key(instance_id: str) -> str:
    return META_KEY_PREFIX + instance_id


def new_run_id() -> str:
    return uuid.uuid4().hex


class RunIds:
    """The ids this server hands out, and which of them are reserved on disk."""

    def __init__(self, batch: int = BATCH) -> None:
        self._batch = batch
        self._pool: collections.deque[tuple[str, int]] = collections.deque()
        self._given: dict[str, int] = {}  # handed out, their run not written yet
        self._generation = 0
        self._unsaved = False
        # Set on the store's thread (one assignment): the newest batch on disk.
        self._confirmed = -1
        self._add_batch()

    def _add_batch(self) -> None:
        self._generation += 1
        self._pool.extend((new_run_id(), self._generation) for _ in range(self._batch))
        self._unsaved = True

    def take(self) -> str:
        """The next run id (a reserved one, once its batch is on disk)."""
        if not self._pool or (len(self._pool) <= self._batch // 2 and not self._unsaved):
            self._add_batch()
        run_id, generation = self._pool.popleft()
        self._given[run_id] = generation
        return run_id

    def covered(self, run_id: str) -> bool:
        """True if `run_id` is reserved on disk: its run may be written late."""
        generation = self._given.get(run_id)
        return generation is not None and generation <= self._confirmed

    def written(self, run_id: str) -> None:
        """The run is on disk: its id need not be reserved any more."""
        self._given.pop(run_id, None)

    def reservation(self) -> tuple[int, str] | None:
        """What to write now (the batch number and the ids as JSON), if anything changed."""
        if not self._unsaved:
            return None
        self._unsaved = False
        ids = sorted({*self._given, *(run_id for run_id, _ in self._pool)})
        return self._generation, json.dumps(ids)

    def confirm(self, generation: int) -> None:
        """On the store's thread: the reservation of `generation` is committed."""
        self._confirmed = max(self._confirmed, generation)
