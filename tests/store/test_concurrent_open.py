"""Servers that start together on a new state directory all keep their history on disk.

The first to open the database switches it to WAL mode; while it does, SQLite refuses
the same switch to the others at once ("database is locked", without its busy handler):
a server that lost that race used to fall back to a history in memory.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path

from subagent_host.store.database import open_database

ROUNDS = 50
TOGETHER = 4
WAIT_S = 60.0


def _open_and_say(state_dir: Path, barrier: Barrier, said: multiprocessing.Queue[str]) -> None:
    barrier.wait(WAIT_S)  # all at once, as servers started together reach their database
    said.put(asyncio.run(_persistence(state_dir)))


def test_servers_opening_a_new_state_directory_together_all_keep_it_on_disk(
    tmp_path: Path,
) -> None:
    # Forked, so that nothing but the open itself lies between the barrier and the race.
    context = multiprocessing.get_context("fork")
    said: list[str] = []
    for round_ in range(ROUNDS):
        barrier, queue = context.Barrier(TOGETHER), context.Queue()
        openers = [
            context.Process(target=_open_and_say, args=(tmp_path / f"s{round_}", barrier, queue))
            for _ in range(TOGETHER)
        ]
        for opener in openers:
            opener.start()
        said += [queue.get(timeout=WAIT_S) for _ in openers]
        for opener in openers:
            opener.join(WAIT_S)
            assert opener.exitcode == 0
    assert said == ["sqlite"] * (ROUNDS * TOGETHER)


async def _persistence(state_dir: Path) -> str:
    store = await open_database(state_dir)
    persistence = store.persistence
    await store.close()
    return persistence
