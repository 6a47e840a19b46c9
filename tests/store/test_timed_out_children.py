"""A timed-out child keeps the timeout it enforced, also in its stored record: its run
reports it whenever it settles from that child again (after a resume of another child,
on another server). Records from before it was kept get it back when read."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from subagent_host.runs.endings import ChildCompleted, ChildTimedOut, TimedOut
from subagent_host.runs.state import Run, RunStateMachine
from subagent_host.store import reads
from subagent_host.store.database import Database
from tests.store.test_store import make_run, query, save, ticking

RUN_TIMEOUT_MS = 500
LAUNCH_STALL_MS = 30_000


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Database]:
    opened = await Database.open(tmp_path / "state")
    yield opened
    await opened.close()


def timed_out_twice() -> Run:
    """Child 0 timed out, child 1 stalled, child 2 completed: the run timed out from child 0."""
    state_machine = RunStateMachine(clock=ticking())
    run = make_run("r1", children=3)
    state_machine.start(run)
    timeout, stall, done = run.children
    state_machine.transition_child(run, timeout, ChildTimedOut("timeout", RUN_TIMEOUT_MS))
    state_machine.transition_child(run, stall, ChildTimedOut("stall", 2_000))
    state_machine.transition_child(run, done, ChildCompleted())
    state_machine.transition(run, TimedOut("timeout", RUN_TIMEOUT_MS))
    return run


async def test_a_timed_out_childs_enforced_timeout_is_stored_with_it(store: Database) -> None:
    run = timed_out_twice()
    await save(store, run)
    loaded = await store.call(reads.load_run, store, "r1")
    assert loaded is not None
    assert [c.enforced_timeout_ms for c in loaded.children] == [RUN_TIMEOUT_MS, 2_000, None]


async def test_a_record_from_before_it_was_kept_takes_the_runs_else_its_launch_limit(
    store: Database,
) -> None:
    await save(store, timed_out_twice())
    projection = {"v": 1, "limits": {"timeoutMs": 60_000, "stallTimeoutMs": LAUNCH_STALL_MS}}

    def make_legacy() -> None:
        with store.immediate() as db:
            db.execute("UPDATE attempts SET record = json_remove(record, '$.enforced_timeout_ms')")
            db.execute(
                "INSERT OR REPLACE INTO children (run_id, idx, projection, projection_digest)"
                " VALUES ('r1', 1, ?, 'sha256:v1:0')",
                (json.dumps(projection),),
            )

    await store.call(make_legacy)
    stored = await query(store, "SELECT record FROM attempts ORDER BY idx")
    assert all("enforced_timeout_ms" not in json.loads(record) for (record,) in stored)
    loaded = await store.call(reads.load_run, store, "r1")
    assert loaded is not None
    # Child 0 is the one the run settled from; child 1's is its launch's stall timeout.
    assert [c.enforced_timeout_ms for c in loaded.children] == [
        RUN_TIMEOUT_MS,
        LAUNCH_STALL_MS,
        None,
    ]
