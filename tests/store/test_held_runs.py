"""A new task-mode run is written once, with its end; a crash meanwhile still leaves it found.

The recorder holds a new task-mode run off the disk while it has not ended
(HOLD_S at most), but only when its id is reserved on disk (run_ids.py): the
next server ends the processes marked with a dead server's reserved ids.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from subagent_host.runs.endings import Cancelled, ChildCompleted, ChildExit, Completed
from subagent_host.runs.state import Run, RunEvent, RunStateMachine
from subagent_host.store import instances, rows
from subagent_host.store.database import Database
from subagent_host.store.recorder import HOLD_S, Recorder
from subagent_host.store.run_ids import RunIds, meta_key
from tests.store.test_store import ME, make_run, query, ticking
from tests.waits import loop_turns


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Database]:
    opened = await Database.open(tmp_path / "state")
    yield opened
    assert await query(opened, "PRAGMA integrity_check") == [("ok",)]
    await opened.close()


async def started(store: Database, run_ids: RunIds) -> None:
    """Register ME with its first reservation, as RunStore.start does."""
    generation, reserved = run_ids.reservation() or (0, None)
    await store.call(instances.register_instance, store, ME, 1, 1.0, ticking()(), reserved)
    run_ids.confirm(generation)


def task_run(run_ids: RunIds) -> Run:
    return make_run(run_ids.take(), mode="task")


async def stored_ids(store: Database) -> list[str]:
    return [run_id for (run_id,) in await query(store, "SELECT run_id FROM runs")]


async def test_a_task_run_that_ends_in_a_few_turns_is_one_write(store: Database) -> None:
    run_ids = RunIds()
    await started(store, run_ids)
    recorder = Recorder(store, ME, history_limit=10, run_ids=run_ids)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    run = task_run(run_ids)
    commits = store.commits

    state_machine.created(run)
    state_machine.start_child(run, run.children[0], pid=4242)
    await loop_turns()
    await store.drained()
    assert await stored_ids(store) == []  # held: not ended yet
    state_machine.transition_child(
        run, run.children[0], ChildCompleted(exit=ChildExit(exit_code=0))
    )
    state_machine.transition(run, Completed())
    await recorder.durable(run)

    assert store.commits - commits == 1
    assert await query(store, "SELECT status, last_seq FROM runs") == [("completed", run.last_seq)]
    assert await query(store, "SELECT count(*) FROM events") == [(run.last_seq,)]


async def test_a_held_run_still_running_is_written_once_its_hold_is_over(
    store: Database,
) -> None:
    run_ids = RunIds()
    await started(store, run_ids)
    recorder = Recorder(store, ME, history_limit=10, run_ids=run_ids)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    run = task_run(run_ids)
    loop = asyncio.get_running_loop()
    submitted = asyncio.Event()
    submit = store.submit

    def noting_submit(*args: Any) -> concurrent.futures.Future[object]:
        submitted.set()
        return submit(*args)

    store.submit = noting_submit  # type: ignore[method-assign,assignment]
    held_at = loop.time()
    state_machine.created(run)
    state_machine.start_child(run, run.children[0], pid=4242)
    async with asyncio.timeout(HOLD_S + 5):
        await submitted.wait()
    written_at = loop.time()
    await store.drained()

    assert written_at - held_at >= HOLD_S
    assert await query(store, "SELECT status FROM runs") == [("running",)]
    assert await query(store, "SELECT pid FROM attempts") == [(4242,)]


async def test_whoever_waits_for_the_disk_ends_every_hold(store: Database) -> None:
    run_ids = RunIds()
    await started(store, run_ids)
    recorder = Recorder(store, ME, history_limit=10, run_ids=run_ids)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    run = task_run(run_ids)

    state_machine.created(run)
    await recorder.durable()  # a lookup, or a reply naming another run

    assert await stored_ids(store) == [run.run_id]


async def test_a_run_whose_id_is_not_reserved_on_disk_is_written_at_once(
    store: Database,
) -> None:
    run_ids = RunIds()  # its reservation never written: no id is covered
    recorder = Recorder(store, ME, history_limit=10, run_ids=run_ids)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    unreserved, background = task_run(run_ids), make_run("r-background", mode="background")

    state_machine.created(unreserved)
    state_machine.created(background)
    await loop_turns()
    await store.drained()

    assert sorted(await stored_ids(store)) == sorted([unreserved.run_id, "r-background"])


async def test_new_ids_are_reserved_with_a_later_write_before_the_first_batch_runs_out(
    store: Database,
) -> None:
    run_ids = RunIds(batch=4)
    await started(store, run_ids)
    recorder = Recorder(store, ME, history_limit=10, run_ids=run_ids)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    taken = [run_ids.take() for _ in range(3)]  # the fourth batch id is left: time to refill

    state_machine.created(
        make_run("r-carrier", mode="background")
    )  # a write to carry the reservation
    await recorder.durable()
    (stored,) = await query(store, "SELECT value FROM meta WHERE key = ?", meta_key(ME))
    reserved = json.loads(stored[0])
    following = [run_ids.take() for _ in range(5)]

    assert set(taken + following) <= set(reserved)
    assert all(run_ids.covered(run_id) for run_id in taken + following)


async def test_recovery_queues_the_marker_scan_for_a_dead_servers_unwritten_reserved_ids(
    store: Database,
) -> None:
    run_ids = RunIds(batch=4)
    await started(store, run_ids)
    written, unwritten = run_ids.take(), run_ids.take()
    state_machine = RunStateMachine(clock=ticking(), listener=Recorder(store, ME, 10, run_ids))
    state_machine.created(make_run(written))
    await asyncio.sleep(0)
    await store.drained()

    interrupted, _ = await store.call(
        instances.recover, store, "later", lambda _pid, _ct: False, RunStateMachine(clock=ticking())
    )

    assert interrupted == [written]  # stored: marked interrupted as ever
    pending, _ = await store.call(instances.pending_cleanups, store)
    assert unwritten in pending and written in pending
    assert len(pending) == 4  # the written run, and the three reserved ids no run has
    assert await query(store, "SELECT count(*) FROM meta WHERE key = ?", meta_key(ME)) == [(0,)]


async def test_a_server_that_ends_gives_its_reserved_ids_back(store: Database) -> None:
    run_ids = RunIds()
    await started(store, run_ids)

    await store.call(instances.end_instance, store, ME, ticking()())
    await store.call(
        instances.recover, store, "later", lambda _pid, _ct: False, RunStateMachine(clock=ticking())
    )

    assert await store.call(instances.pending_cleanups, store) == ([], [])


async def holding(store: Database) -> tuple[Recorder, RunStateMachine, Run]:
    """A recorder that holds task-mode runs, its run state machine, and a new task-mode run."""
    run_ids = RunIds()
    await started(store, run_ids)
    recorder = Recorder(store, ME, history_limit=10, run_ids=run_ids)
    return recorder, RunStateMachine(clock=ticking(), listener=recorder), task_run(run_ids)


async def test_a_held_runs_projection_is_sealed_once_after_the_turn_its_child_starts_in(
    store: Database,
) -> None:
    recorder, state_machine, run = await holding(store)
    sealings: list[int] = []
    turns = [0]

    def sealing() -> tuple[str, str]:
        sealings.append(turns[0])
        return '{"v":1}', "sha256:v1:" + "0" * 64

    state_machine.created(run)  # the launch's step: its first child starts in the next turn
    recorder.projection(run, 0, sealing)
    assert sealings == []
    for _ in range(3):
        turns[0] += 1
        await asyncio.sleep(0)
    assert sealings == [2]  # once, after the turn the child started in
    state_machine.start(run)
    state_machine.transition(run, Cancelled("stopped"))
    await recorder.durable(run)

    assert sealings == [2]  # the write took the sealed projection as it was
    assert await query(store, "SELECT idx, projection FROM children") == [(0, '{"v":1}')]


async def test_a_projection_not_sealed_yet_is_sealed_by_the_write_of_its_run(
    store: Database,
) -> None:
    recorder = Recorder(store, ME, history_limit=10)  # no reserved ids: nothing is held
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    run = make_run("r-background")
    calls: list[str] = []

    def sealing() -> tuple[str, str]:
        calls.append(run.run_id)
        return '{"v":1}', "sha256:v1:" + "1" * 64

    state_machine.created(run)
    recorder.projection(run, 0, sealing)
    await recorder.durable(run)  # before any spare turn

    assert calls == ["r-background"]
    assert await query(store, "SELECT projection_digest FROM children") == [
        ("sha256:v1:" + "1" * 64,)
    ]
    await loop_turns()
    assert calls == ["r-background"]  # sealed once


async def test_a_held_runs_early_events_are_encoded_in_a_spare_turn_before_its_end(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder, state_machine, run = await holding(store)
    encoded: list[int] = []
    encode = rows.event_record

    def noting_encode(event: RunEvent) -> dict[str, Any]:
        encoded.append(event.seq)
        return encode(event)

    monkeypatch.setattr(rows, "event_record", noting_encode)
    state_machine.created(run)  # the launch's step
    recorder.projection(run, 0, lambda: ('{"v":1}', "sha256:v1:" + "2" * 64))
    await asyncio.sleep(0)  # the child starts in the next turn
    state_machine.start_child(run, run.children[0], pid=4242)
    await loop_turns()
    assert encoded == [1, 2, 3]  # queued, running, child running: while the child runs
    assert await stored_ids(store) == []  # still held

    state_machine.transition_child(
        run, run.children[0], ChildCompleted(exit=ChildExit(exit_code=0))
    )
    state_machine.transition(run, Completed())
    await recorder.durable(run)

    assert encoded == [1, 2, 3, 4, 5]  # the end's write encoded only its own events
    stored = await query(store, "SELECT seq, record FROM events ORDER BY seq")
    assert [seq for seq, _ in stored] == [1, 2, 3, 4, 5]
    assert [json.loads(record)["fields"] for _, record in stored] == [
        {"status": "queued"},
        {"status": "running"},
        {"index": 0, "status": "running"},
        {"index": 0, "status": "completed"},
        {"status": "completed"},
    ]
