"""Run history on disk: the store and its files, rows and back, pruning, recovery, the recorder."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sqlite3
import stat
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from subagent_host.backends.exits import StoppedBy
from subagent_host.errors import RecordFailed
from subagent_host.runs.endings import (
    Cancelled,
    ChildCancelled,
    ChildCompleted,
    ChildExit,
    ChildFailed,
    ChildTimedOut,
    Completed,
    Failed,
    TimedOut,
)
from subagent_host.runs.state import (
    MAX_EVENT_BYTES_KEPT,
    ChildRun,
    EventLog,
    Run,
    RunStateMachine,
    RunStatus,
)
from subagent_host.store import instances, reads, writes
from subagent_host.store import recorder as recorder_module
from subagent_host.store.database import Database
from subagent_host.store.recorder import STORE_BACKLOG_BYTES, Recorder
from subagent_host.store.records import child_from_record, child_record, run_from_record, run_record
from subagent_host.store.rows import RunRow, run_row
from subagent_host.store.schema import DB_NAME, MIGRATIONS, SCHEMA_VERSION, StoreError
from subagent_host.values import RunKind
from subagent_host.values.error_data import RunRef
from subagent_host.values.events import ChildEvent, MessageEvent, OutputEvent, StatusEvent
from subagent_host.values.facts import (
    Diagnostic,
    ErrorInfo,
    OutputInfo,
    Resources,
    RunSummary,
    Usage,
)
from tests.waits import loop_turns

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ME = "instance-me"


def ticking() -> Callable[[], datetime]:
    """A clock that moves 250 ms per reading, so every stamp differs."""
    ticks = itertools.count(1)
    return lambda: T0 + timedelta(milliseconds=250 * next(ticks))


def make_run(
    run_id: str, session_id: str = "s1", children: int = 1, minute: int = 0, **fields: Any
) -> Run:
    return Run(
        run_id=run_id,
        session_id=session_id,
        kind=RunKind.PARALLEL if children > 1 else RunKind.SINGLE,
        fingerprint="sha256:v1:" + "0" * 64,
        created_at=T0 + timedelta(minutes=minute),
        children=[ChildRun(index=i, backend="command") for i in range(children)],
        **fields,
    )


def completed_run(
    state_machine: RunStateMachine, run_id: str, session_id: str = "s1", minute: int = 0
) -> Run:
    run = make_run(run_id, session_id, minute=minute)
    output = OutputInfo(text="ok\n", truncated=False, bytes=3, lines=1, partial=False)
    state_machine.start(run)
    state_machine.start_child(run, run.children[0])
    state_machine.transition_child(
        run, run.children[0], ChildCompleted(output, ChildExit(exit_code=0))
    )
    state_machine.transition(run, Completed(output))
    return run


def without_events(run: Run) -> Run:
    """The run as `load_run` gives it back: every field but the events."""
    return attrs.evolve(run, events=EventLog())


async def save(store: Database, *runs: Run, instance: str = ME, limit: int = 100) -> None:
    rows = [run_row(run, list(run.events)) for run in runs]
    await store.call(writes.save, store, instance, rows, limit)


async def query(store: Database, sql: str, *params: object) -> list[tuple[Any, ...]]:
    return await store.call(lambda: store.db.execute(sql, params).fetchall())


async def pragma(store: Database, name: str) -> Any:
    return (await query(store, f"PRAGMA {name}"))[0][0]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Database]:
    opened = await Database.open(tmp_path / "state")
    yield opened
    assert await query(opened, "PRAGMA integrity_check") == [("ok",)]
    assert await query(opened, "PRAGMA foreign_key_check") == []
    await opened.close()


# --- the files and the connection --------------------------------------------------------


async def test_the_state_dir_is_0700_and_the_database_and_its_wal_files_0600(
    tmp_path: Path,
) -> None:
    state = tmp_path / "deep" / "state"
    store = await Database.open(state)
    try:
        await save(store, completed_run(RunStateMachine(clock=ticking()), "r1"))
        assert mode(state) == 0o700
        assert mode(state / DB_NAME) == 0o600
        for suffix in ("-wal", "-shm"):
            side = state / (DB_NAME + suffix)
            assert side.exists(), f"{side.name} missing while the store is open"
            assert mode(side) == 0o600, side.name
    finally:
        await store.close()


async def test_an_existing_state_dir_is_used_as_it_is_and_its_database_tightened(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    sqlite3.connect(state / DB_NAME).close()
    (state / DB_NAME).chmod(0o644)
    store = await Database.open(state)
    await store.close()
    assert (mode(state), mode(state / DB_NAME)) == (0o755, 0o600)


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
async def test_a_database_file_that_is_a_symlink_is_never_opened(
    tmp_path: Path, suffix: str
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o1777)  # shared and sticky: others may plant entries in it
    elsewhere = tmp_path / "elsewhere"
    (state / (DB_NAME + suffix)).symlink_to(elsewhere)
    with pytest.raises(StoreError, match="is a symlink"):
        await Database.open(state)
    assert not elsewhere.exists()
    assert mode(state) == 0o1777  # never chmod'ed


async def test_the_connection_uses_wal_normal_sync_a_busy_timeout_and_the_schema_version(
    store: Database,
) -> None:
    assert await pragma(store, "journal_mode") == "wal"
    assert await pragma(store, "synchronous") == 1  # NORMAL
    assert await pragma(store, "busy_timeout") == 10_000
    assert await pragma(store, "foreign_keys") == 1
    assert await pragma(store, "user_version") == SCHEMA_VERSION
    tables = {name for (name,) in await query(store, "SELECT name FROM sqlite_master")}
    assert {"meta", "instances", "runs", "children", "attempts", "events"} <= tables


SCHEMA = "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite%' ORDER BY name"


def make_version_1_database(state_dir: Path) -> None:
    state_dir.chmod(0o700)
    db = sqlite3.connect(state_dir / DB_NAME, isolation_level=None)
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version = 1")
    db.execute(
        "INSERT INTO runs (run_id, session_id, instance_id, kind, status, created_at, last_seq,"
        " record) VALUES ('r1', 's', 'i', 'single', 'completed', '2026-01-01T00:00:00+00:00',"
        " 0, '{}')"
    )
    db.close()


async def test_a_version_1_database_is_migrated_forward_keeping_its_rows(tmp_path: Path) -> None:
    make_version_1_database(tmp_path)
    store = await Database.open(tmp_path)
    try:
        version = await store.call(lambda: store.db.execute("PRAGMA user_version").fetchone()[0])
        tables = await store.call(
            lambda: {r[0] for r in store.db.execute("SELECT name FROM sqlite_master")}
        )
        kept = await store.call(lambda: store.db.execute("SELECT run_id FROM runs").fetchall())
    finally:
        await store.close()
    assert version == SCHEMA_VERSION == len(MIGRATIONS)
    assert "cleanups" in tables and kept == [("r1",)]


async def test_reopening_a_database_keeps_its_schema_and_rows(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = await Database.open(state)
    run = completed_run(RunStateMachine(clock=ticking()), "r1")
    await save(first, run)
    schema = await query(first, SCHEMA)
    await first.close()

    again = await Database.open(state)
    try:
        assert await pragma(again, "user_version") == SCHEMA_VERSION
        assert await query(again, SCHEMA) == (schema)
        assert await again.call(reads.load_run, again, "r1") == without_events(run)
    finally:
        await again.close()


async def test_a_database_from_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    db = sqlite3.connect(state / DB_NAME)
    db.execute("CREATE TABLE future (x INTEGER)")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    (state / DB_NAME).chmod(0o644)
    before = (state / DB_NAME).read_bytes()

    with pytest.raises(StoreError, match="newer"):
        await Database.open(state)

    # Not a byte written: not its journal mode, not its permissions, no files beside it.
    assert (state / DB_NAME).read_bytes() == before
    assert mode(state / DB_NAME) == 0o644
    assert sorted(path.name for path in state.iterdir()) == [DB_NAME]

    db = sqlite3.connect(state / DB_NAME)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        names = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        assert names == {"future"}
    finally:
        db.close()


async def test_a_state_dir_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot use the state directory"):
        await Database.open(state)
    assert state.read_text() == "not a directory"


async def test_work_runs_in_order_on_the_stores_own_thread(store: Database) -> None:
    seen: list[tuple[int, str]] = []
    for i in range(5):
        store.submit(lambda i=i: seen.append((i, threading.current_thread().name)))
    assert await store.call(lambda: len(seen)) == 5
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
    assert {name for _, name in seen} != {threading.current_thread().name}
    assert all(name.startswith("store") for _, name in seen)


@attrs.define
class HeldWrite:
    """Work for the store's thread that holds it until the test lets go."""

    started: threading.Event = attrs.field(factory=threading.Event)
    gate: threading.Event = attrs.field(factory=threading.Event)
    done: list[int] = attrs.field(factory=list)

    def __call__(self) -> None:
        self.started.set()
        self.gate.wait(10)
        self.done.append(1)

    async def running(self) -> None:
        """Return once the store's thread is inside the write (bounded)."""
        assert await asyncio.to_thread(self.started.wait, 10), "the write never started"

    async def assert_drained_waits(self, store: Database) -> None:
        """`store.drained()` is not done while the write is held, and is done once it ends."""
        draining = asyncio.create_task(store.drained())
        try:
            await loop_turns()
            assert not draining.done(), "drained() returned before the submitted write ran"
        finally:
            self.gate.set()
        await asyncio.wait_for(draining, 10)
        assert self.done == [1]


async def test_drained_waits_for_everything_submitted(store: Database) -> None:
    write = HeldWrite()
    store.submit(write)
    await write.running()
    await write.assert_drained_waits(store)


async def test_drained_waits_for_earlier_work_even_after_a_later_call_was_cancelled(
    store: Database,
) -> None:
    write = HeldWrite()
    store.submit(write)
    await write.running()
    caller = asyncio.create_task(store.call(lambda: None))
    await loop_turns(1)  # the call is queued behind the write
    caller.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await caller
    await write.assert_drained_waits(store)


async def test_an_immediate_transaction_rolls_back_on_an_error(store: Database) -> None:
    def failing() -> None:
        with store.immediate() as db:
            db.execute("INSERT INTO meta (key, value) VALUES ('k', 'v')")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await store.call(failing)
    assert await query(store, "SELECT * FROM meta") == []
    assert await store.call(lambda: store.db.in_transaction) is False


# --- records -------------------------------------------------------------------------------


def test_a_run_and_its_children_survive_a_json_round_trip() -> None:
    state_machine = RunStateMachine(clock=ticking())
    warning = Diagnostic("warning", "snapshot-skipped", "not written", "workflow.snapshotPath")
    run = make_run("r1", children=2, label="both", enforced_timeout_ms=5000, diagnostics=(warning,))
    state_machine.start(run)
    first, second = run.children
    first.create_time = 1234.56
    state_machine.start_child(run, first, pid=4242, pgid=4242, start_time_probe=lambda: 1234.56)
    # Sampled while it runs (runs/sampling.py), not an ending's fact.
    first.resources = Resources(cpu_seconds=0.25, peak_rss_bytes=1 << 20, processes=2)
    state_machine.transition_child(
        run,
        first,
        ChildCompleted(
            OutputInfo(text="é\n", truncated=True, bytes=3, lines=1, partial=False),
            ChildExit(usage=Usage(1, 2, 3, 4, cost_usd=0.5), backend_session_id="b-1"),
        ),
    )
    state_machine.transition_child(run, second, ChildTimedOut("timeout", 5000))
    state_machine.transition(run, TimedOut("timeout", 5000))

    record = json.loads(json.dumps(run_record(run)))
    assert "children" not in record and "events" not in record
    children = [child_from_record(json.loads(json.dumps(child_record(c)))) for c in run.children]
    assert "start_time_probe" not in child_record(first)
    back = run_from_record(record, children)
    assert back == without_events(run)
    assert back.kind is RunKind.PARALLEL and back.status is RunStatus.TIMED_OUT
    assert back.children[0].usage == Usage(1, 2, 3, 4, cost_usd=0.5)
    assert back.children[0].started_at == first.started_at is not None
    assert back.last_seq == run.last_seq == 5
    assert back.diagnostics == (warning,)
    assert "diagnostics" not in run_record(make_run("r2"))  # none: not stored at all


def test_how_a_child_ended_is_kept_in_its_record_and_absent_from_older_records() -> None:
    run = make_run("r1", children=2)
    ended, never_started = run.children
    ended.stopped_by = StoppedBy.SIGKILL
    record = json.loads(json.dumps(child_record(ended)))
    assert record["stopped_by"] == "sigkill"
    assert child_from_record(record).stopped_by is StoppedBy.SIGKILL
    assert "stopped_by" not in child_record(never_started)
    older = {k: v for k, v in record.items() if k != "stopped_by"}  # before it was kept
    assert child_from_record(older).stopped_by is None


# --- saving and loading --------------------------------------------------------------------


async def test_a_saved_run_loads_back_equal_with_its_last_seq(store: Database) -> None:
    state_machine = RunStateMachine(clock=ticking())
    run = make_run("r1", children=4, label="four")
    done, failed, cancelled, running = run.children
    state_machine.start(run)
    state_machine.start_child(run, done)
    done.pid, done.exit_code = 100, 0
    state_machine.transition_child(
        run,
        done,
        ChildCompleted(OutputInfo(text="done\n", truncated=False, bytes=5, lines=1, partial=False)),
    )
    state_machine.start_child(run, failed)
    error = ErrorInfo("exit", "exited with 3", {"exitCode": 3, "stderrTail": "bad\n"})
    state_machine.transition_child(run, failed, ChildFailed(error, exit=ChildExit(exit_code=3)))
    state_machine.transition_child(run, cancelled, ChildCancelled("stopped"))
    state_machine.start_child(run, running)
    running.pid, running.pgid, running.create_time = 200, 200, 99.5
    state_machine.emit(run, OutputEvent(index=3, text="partial…"))
    await save(store, run)

    loaded = await store.call(reads.load_run, store, "r1")
    assert loaded == without_events(run)
    assert loaded is not None and loaded.last_seq == run.last_seq == 8
    assert [c.status for c in loaded.children] == [
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.RUNNING,
    ]
    assert loaded.children[1].error == error
    assert list(loaded.events) == []  # events are read with events_after

    state_machine.transition_child(run, running, ChildFailed(ErrorInfo("x", "y")))
    state_machine.transition(run, Failed(ErrorInfo("child", "child 1: exited with 3")))
    await save(store, run)
    loaded = await store.call(reads.load_run, store, "r1")
    assert loaded == without_events(run)
    assert loaded is not None and loaded.status is RunStatus.FAILED and loaded.last_seq == 10
    assert await query(store, "SELECT status, last_seq FROM runs") == [("failed", 10)]


async def test_load_run_of_an_unknown_id_is_none(store: Database) -> None:
    assert await store.call(reads.load_run, store, "nope") is None


async def test_load_run_gives_each_child_its_newest_attempt(store: Database) -> None:
    state_machine = RunStateMachine(clock=ticking())
    run = completed_run(state_machine, "r1")
    await save(store, run)
    retry = ChildRun(index=0, backend="command", attempt=2)
    run.children[0] = retry
    state_machine.start_child(run, retry)
    await save(store, run)

    loaded = await store.call(reads.load_run, store, "r1")
    assert loaded is not None and loaded.children == [retry]
    rows = await query(store, "SELECT idx, attempt, status FROM attempts ORDER BY attempt")
    assert rows == [(0, 1, "completed"), (0, 2, "running")]


async def test_events_after_gives_later_events_in_order(store: Database) -> None:
    state_machine = RunStateMachine(clock=ticking())
    run = completed_run(state_machine, "r1")
    state_machine.emit(run, MessageEvent(index=0, text="é\u0000", final=True))
    await save(store, run)
    assert run.last_seq == 5

    after = await store.call(reads.events_after, store, "r1", 2)
    assert after == list(run.events)[2:]
    assert [e.seq for e in after] == [3, 4, 5]
    assert after[-1].payload == MessageEvent(index=0, text="é\u0000", final=True)
    assert await store.call(reads.events_after, store, "r1", 5) == []
    assert await store.call(reads.events_after, store, "other", 0) == []


async def test_saving_only_new_events_appends_them(store: Database) -> None:
    state_machine = RunStateMachine(clock=ticking())
    run = make_run("r1")
    state_machine.start(run)
    await save(store, run)
    state_machine.emit(run, OutputEvent(index=0, text="a"))
    await store.call(writes.save, store, ME, [run_row(run, [run.events[-1]])], 100)
    assert [e.seq for e in await store.call(reads.events_after, store, "r1", 0)] == [1, 2]


async def test_stored_events_are_bounded_in_bytes_as_in_memory(store: Database) -> None:
    state_machine = RunStateMachine(clock=ticking())
    run = make_run("r1")
    state_machine.start(run)
    chunk = "x" * (1024 * 1024)
    for _ in range(3 * MAX_EVENT_BYTES_KEPT // len(chunk)):  # one write per turn, as the recorder
        state_machine.emit(run, OutputEvent(index=0, text=chunk))
        await store.call(writes.save, store, ME, [run_row(run, [run.events[-1]])], 100)
    stored = await store.call(reads.events_after, store, "r1", 0)
    assert [e.seq for e in stored] == [e.seq for e in run.events]
    assert stored[0].seq == run.first_retained_seq > 1
    (text_bytes,) = (
        await query(
            store,
            "SELECT sum(length(CAST(json_extract(record, '$.fields.text') AS BLOB)))"
            " FROM events WHERE run_id = 'r1'",
        )
    )[0]
    assert text_bytes <= MAX_EVENT_BYTES_KEPT
    loaded = await store.call(reads.load_run, store, "r1")
    assert loaded is not None and loaded.first_retained_seq == run.first_retained_seq


async def test_list_runs_gives_this_sessions_runs_newest_first(store: Database) -> None:
    state_machine = RunStateMachine(clock=ticking())
    runs = [completed_run(state_machine, f"r{i}", minute=i) for i in (2, 0, 3, 1)]
    await save(store, *runs, completed_run(state_machine, "x9", session_id="s2", minute=9))
    running = make_run("r4", minute=4, label="live")
    state_machine.start(running)
    await save(store, running)

    summaries = await store.call(reads.list_runs, store, "s1", 10)
    assert [s.run_id for s in summaries] == ["r4", "r3", "r2", "r1", "r0"]
    assert summaries[0] == RunSummary(
        run_id="r4",
        kind=RunKind.SINGLE,
        status=RunStatus.RUNNING,
        created_at=T0 + timedelta(minutes=4),
        ended_at=None,
        label="live",
    )
    assert summaries[1].status == "completed" and summaries[1].ended_at == runs[2].ended_at
    assert [s.run_id for s in await store.call(reads.list_runs, store, "s1", 2)] == ["r4", "r3"]
    assert [s.run_id for s in await store.call(reads.list_runs, store, "s2", 10)] == ["x9"]
    assert await store.call(reads.list_runs, store, "s3", 10) == []


async def test_pruning_keeps_the_newest_runs_and_never_a_live_one(store: Database) -> None:
    state_machine = RunStateMachine(clock=ticking())
    old_running = make_run("r-old", minute=-10)
    state_machine.start(old_running)
    old_queued = make_run("r-older", minute=-20)
    await save(store, old_running, old_queued, limit=3)
    other = completed_run(state_machine, "x-other", session_id="s2", minute=-30)
    await save(store, other, limit=3)
    for i in range(5):
        await save(store, completed_run(state_machine, f"r{i}", minute=i), limit=3)

    ids = [s.run_id for s in await store.call(reads.list_runs, store, "s1", 100)]
    assert ids == ["r4", "r3", "r2", "r-old", "r-older"]
    assert [s.run_id for s in await store.call(reads.list_runs, store, "s2", 100)] == ["x-other"]
    kept = {r for (r,) in await query(store, "SELECT DISTINCT run_id FROM attempts")}
    assert kept == {"r4", "r3", "r2", "r-old", "r-older", "x-other"}
    kept = {r for (r,) in await query(store, "SELECT DISTINCT run_id FROM events")}
    assert kept == {"r4", "r3", "r2", "r-old", "x-other"}  # r-older never had an event

    state_machine.transition(old_running, Cancelled("stopped"))
    await save(store, old_running, limit=3)
    ids = [s.run_id for s in await store.call(reads.list_runs, store, "s1", 100)]
    assert ids == ["r4", "r3", "r2", "r-older"]
    assert await query(store, "SELECT count(*) FROM events WHERE run_id = 'r-old'") == [(0,)]


async def test_events_on_disk_are_bounded_per_run_while_seq_keeps_counting(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writes, "MAX_EVENTS_KEPT", 5)
    state_machine = RunStateMachine(clock=ticking())
    run = make_run("r1")
    state_machine.start(run)
    for n in range(7):
        state_machine.emit(run, OutputEvent(index=0, text=str(n)))
    await save(store, run)  # 8 events in one write
    assert await query(store, "SELECT seq FROM events ORDER BY seq") == [(s,) for s in range(4, 9)]
    for n in range(4):
        state_machine.emit(run, OutputEvent(index=0, text=f"more {n}"))
        await save(store, run)

    assert await query(store, "SELECT seq FROM events ORDER BY seq") == [(s,) for s in range(8, 13)]
    after = await store.call(reads.events_after, store, "r1", 0)
    assert [e.seq for e in after] == [8, 9, 10, 11, 12]
    assert after[-1].payload == OutputEvent(index=0, text="more 3")
    loaded = await store.call(reads.load_run, store, "r1")
    assert loaded is not None and loaded.last_seq == 12


async def test_run_ids_with_prefix_match_literally_within_the_session(store: Database) -> None:
    state_machine = RunStateMachine(clock=ticking())
    ids = ["abc%def", "abcXdef", "abc_1", "abcd1", "abc\\z", "abz"]
    await save(store, *(completed_run(state_machine, r, minute=i) for i, r in enumerate(ids)))
    await save(store, completed_run(state_machine, "abc%other", session_id="s2"))

    def prefixed(session_id: str, prefix: str, limit: int = 10) -> list[str]:
        return sorted(reads.run_ids_with_prefix(store, session_id, prefix, limit))

    assert await store.call(prefixed, "s1", "abc%") == ["abc%def"]
    assert await store.call(prefixed, "s1", "abc_") == ["abc_1"]
    assert await store.call(prefixed, "s1", "abc\\") == ["abc\\z"]
    assert await store.call(prefixed, "s1", "abc") == sorted(ids[:5])
    assert await store.call(prefixed, "s2", "abc") == ["abc%other"]
    assert await store.call(prefixed, "s1", "abcd1") == ["abcd1"]
    assert await store.call(prefixed, "s3", "abc") == []
    two = await store.call(reads.run_ids_with_prefix, store, "s1", "abc")
    assert len(two) == 2 and set(two) <= set(ids[:5])


# --- recovery --------------------------------------------------------------------------------

DEAD_PID, ALIVE_PID, MY_PID, LATER_PID = 1001, 1002, 1003, 1004


def alive_pids(*pids: int) -> Callable[[int, float], bool]:
    return lambda pid, _create_time: pid in pids


async def register(store: Database, instance: str, pid: int) -> None:
    await store.call(instances.register_instance, store, instance, pid, float(pid), T0)


async def test_recover_interrupts_runs_of_gone_instances_exactly_once(store: Database) -> None:
    state_machine = RunStateMachine(clock=ticking())
    for instance, pid in (("dead", DEAD_PID), ("alive", ALIVE_PID), (ME, MY_PID)):
        await register(store, instance, pid)

    mixed = make_run("r-mixed", children=3)
    done, busy, waiting = mixed.children
    state_machine.start(mixed)
    state_machine.start_child(mixed, done)
    done.pid, done.create_time = 3131, 555.0  # ended: not a leftover
    state_machine.transition_child(mixed, done, ChildFailed(ErrorInfo("exit", "exit 1")))
    state_machine.start_child(mixed, busy)
    busy.pid, busy.pgid, busy.create_time = 4242, 4242, 777.25
    queued = make_run("r-queued")
    finished = completed_run(state_machine, "r-finished")
    await save(store, mixed, queued, finished, instance="dead")
    theirs = make_run("r-theirs")
    state_machine.start(theirs)
    await save(store, theirs, instance="alive")
    mine = make_run("r-mine")
    state_machine.start(mine)
    await save(store, mine, instance=ME)
    stray = make_run("r-stray")
    state_machine.start(stray)
    state_machine.start_child(stray, stray.children[0])
    stray.children[0].pid = 5151  # its start time was never read
    await save(store, stray, instance="never-registered")
    events_before = await query(store, "SELECT run_id, seq, record FROM events ORDER BY 1, 2")

    interrupted, leftovers = await store.call(
        instances.recover, store, ME, alive_pids(ALIVE_PID), RunStateMachine(clock=ticking())
    )

    assert sorted(interrupted) == ["r-mixed", "r-queued", "r-stray"]
    assert sorted(leftovers, key=lambda left: left.pid) == [
        instances.Leftover("r-mixed", 4242, 777.25),
        instances.Leftover("r-stray", 5151, None),
    ]
    loaded = {r: await store.call(reads.load_run, store, r) for r in interrupted}
    for run_id, run in loaded.items():
        assert run is not None and run.status is RunStatus.INTERRUPTED, run_id
        assert run.reason is not None and run.reason.startswith("server-died"), run_id
        assert run.ended_at is not None
    got, stray_back = loaded["r-mixed"], loaded["r-stray"]
    assert got is not None and str(DEAD_PID) in (got.reason or "")
    assert stray_back is not None and "unknown" in (stray_back.reason or "")
    assert got.children[0] == done  # terminal: unchanged
    assert [c.status for c in got.children[1:]] == [RunStatus.INTERRUPTED] * 2
    assert all((c.reason or "").startswith("server-died") for c in got.children[1:])
    assert got.children[1].pid == 4242 and got.children[1].create_time == 777.25
    assert got.last_seq == mixed.last_seq + 3
    new_events = await store.call(reads.events_after, store, "r-mixed", mixed.last_seq)
    assert [(e.seq, e.payload) for e in new_events] == [
        (mixed.last_seq + 1, ChildEvent(index=1, status=RunStatus.INTERRUPTED)),
        (mixed.last_seq + 2, ChildEvent(index=2, status=RunStatus.INTERRUPTED)),
        (mixed.last_seq + 3, StatusEvent(status=RunStatus.INTERRUPTED)),
    ]
    assert [e.seq for e in await store.call(reads.events_after, store, "r-queued", 0)] == [1, 2]

    for run in (finished, theirs, mine):
        assert await store.call(reads.load_run, store, run.run_id) == without_events(run)
    owners = await query(store, "SELECT run_id, instance_id FROM runs ORDER BY run_id")
    assert dict(owners)["r-mixed"] == "dead" and dict(owners)["r-stray"] == "never-registered"
    ended = dict(await query(store, "SELECT instance_id, ended_at FROM instances"))
    assert ended["dead"] is not None and ended["alive"] is None and ended[ME] is None

    # A later server sees nothing left to mark: each run was interrupted once.
    await register(store, "later", LATER_PID)
    again = await store.call(
        instances.recover,
        store,
        "later",
        alive_pids(ALIVE_PID, MY_PID),
        RunStateMachine(clock=ticking()),
    )
    assert again == ([], [])
    statuses = await query(
        store,
        'SELECT run_id, count(*) FROM events WHERE record LIKE \'%"status":"interrupted"%\''
        ' AND record LIKE \'%"type":"status"%\' GROUP BY run_id ORDER BY run_id',
    )
    assert statuses == [("r-mixed", 1), ("r-queued", 1), ("r-stray", 1)]
    events_after_all = await query(store, "SELECT run_id, seq, record FROM events ORDER BY 1, 2")
    assert set(events_before) < set(events_after_all)
    assert len(events_after_all) - len(events_before) == 3 + 2 + 2


async def test_recover_leaves_a_live_instances_runs_and_its_own_alone(store: Database) -> None:
    state_machine = RunStateMachine(clock=ticking())
    await register(store, "alive", ALIVE_PID)
    await register(store, ME, MY_PID)
    theirs = make_run("r-theirs")
    state_machine.start(theirs)
    await save(store, theirs, instance="alive")
    mine = make_run("r-mine")
    await save(store, mine, instance=ME)
    checked: list[tuple[int, float]] = []

    def is_alive(pid: int, create_time: float) -> bool:
        checked.append((pid, create_time))
        return True

    result = await store.call(
        instances.recover, store, ME, is_alive, RunStateMachine(clock=ticking())
    )
    assert result == ([], [])
    assert checked == [(ALIVE_PID, float(ALIVE_PID))]
    rows = await query(store, "SELECT run_id, status, last_seq FROM runs ORDER BY run_id")
    assert rows == [("r-mine", "queued", 0), ("r-theirs", "running", 1)]


async def test_recover_treats_an_ended_instance_as_gone_even_if_its_pid_is_alive(
    store: Database,
) -> None:
    await register(store, "ended", ALIVE_PID)
    await store.call(instances.end_instance, store, "ended", T0 + timedelta(hours=1))
    left = make_run("r-left")
    RunStateMachine(clock=ticking()).start(left)
    await save(store, left, instance="ended")

    interrupted, _ = await store.call(
        instances.recover, store, ME, alive_pids(ALIVE_PID), RunStateMachine(clock=ticking())
    )
    assert interrupted == ["r-left"]
    ended = await query(store, "SELECT ended_at FROM instances WHERE instance_id = 'ended'")
    assert ended == [((T0 + timedelta(hours=1)).isoformat(),)]  # the first end is kept


async def test_two_servers_recovering_at_once_interrupt_each_run_once(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first, second = await Database.open(state), await Database.open(state)
    try:
        state_machine = RunStateMachine(clock=ticking())
        await register(first, "dead", DEAD_PID)
        runs = [make_run(f"r{i}") for i in range(20)]
        for run in runs:
            state_machine.start(run)
        await save(first, *runs, instance="dead")
        await register(first, "a", MY_PID)
        await register(second, "b", LATER_PID)

        is_alive = alive_pids(MY_PID, LATER_PID)
        (got_a, _), (got_b, _) = await asyncio.gather(
            first.call(instances.recover, first, "a", is_alive, RunStateMachine(clock=ticking())),
            second.call(instances.recover, second, "b", is_alive, RunStateMachine(clock=ticking())),
        )
        assert sorted(got_a + got_b) == sorted(r.run_id for r in runs)
        assert not (got_a and got_b)  # one transaction took them all
        counts = await query(first, "SELECT count(*), max(last_seq) FROM runs")
        assert counts == [(20, 3)]  # running, then child and run interrupted
        assert await query(first, "SELECT count(*) FROM events") == [(60,)]
    finally:
        await first.close()
        await second.close()


# --- the recorder ------------------------------------------------------------------------------


async def test_the_recorder_writes_one_save_per_loop_turn(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    saves: list[list[tuple[str, list[int]]]] = []
    real_save = writes.save

    def counting_save(
        store: Database, instance_id: str, rows: Sequence[RunRow], *rest: Any
    ) -> writes.Saved:
        saves.append([(row.run_id, [seq for seq, _ in row.events]) for row in rows])
        return real_save(store, instance_id, rows, *rest)

    monkeypatch.setattr(writes, "save", counting_save)
    recorder = Recorder(store, ME, history_limit=10)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    first, second = make_run("r1"), make_run("r2", minute=1)

    state_machine.start(first)
    state_machine.start_child(first, first.children[0])
    state_machine.emit(first, OutputEvent(index=0, text="hi"))
    state_machine.start(second)
    assert saves == []  # nothing is written before the turn ends
    await asyncio.sleep(0)
    await store.drained()
    assert saves == [[("r1", [1, 2, 3]), ("r2", [1])]]

    state_machine.transition_child(first, first.children[0], ChildCancelled("stopped"))
    state_machine.transition(first, Cancelled("stopped"))
    await asyncio.sleep(0)
    await store.drained()
    assert saves[1:] == [[("r1", [4, 5])]]
    assert await query(store, "SELECT run_id, status, last_seq FROM runs ORDER BY run_id") == [
        ("r1", "cancelled", 5),
        ("r2", "running", 1),
    ]
    assert await query(store, "SELECT count(*) FROM events") == [(6,)]


async def test_the_recorder_says_when_too_many_events_wait_for_the_disk(store: Database) -> None:
    recorder = Recorder(store, ME, history_limit=10)
    told: list[str] = []
    drained = asyncio.Event()

    def on_drained() -> None:
        told.append("drained")
        drained.set()

    recorder.watch_backlog(lambda: told.append("full"), on_drained)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    run = make_run("r1")
    state_machine.start(run)
    gate = threading.Event()
    store.submit(gate.wait, 10)  # the disk is busy: nothing is committed meanwhile
    chunk = "x" * (256 * 1024)
    for _ in range(STORE_BACKLOG_BYTES // len(chunk) + 1):
        state_machine.emit(run, OutputEvent(index=0, text=chunk))
        await asyncio.sleep(0)  # one write per turn
    assert told == ["full"] and recorder.full
    gate.set()
    await asyncio.wait_for(drained.wait(), 10)
    assert told == ["full", "drained"] and not recorder.full


async def test_a_full_recorder_looks_at_its_backlog_once_per_committed_write(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(store, ME, history_limit=10)
    recorder.watch_backlog(lambda: None, lambda: None)
    looks = 0
    check_backlog = recorder._check_backlog

    def counting_check() -> None:
        nonlocal looks
        looks += 1
        check_backlog()

    monkeypatch.setattr(recorder, "_check_backlog", counting_check)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    run = make_run("r1")
    state_machine.start(run)
    gate = threading.Event()
    store.submit(gate.wait, 10)  # the disk is busy: every write below waits
    chunk = "x" * (256 * 1024)
    writes = STORE_BACKLOG_BYTES // len(chunk) + 20
    for _ in range(writes):
        state_machine.emit(run, OutputEvent(index=0, text=chunk))
        await asyncio.sleep(0)  # one write per turn
    assert recorder.full
    looks = 0
    gate.set()
    await recorder.durable()
    await loop_turns(10)
    # One look per write the disk committed while full, not one per write made while
    # full for every one committed.
    assert looks <= writes + 1, looks


async def test_a_run_launched_a_moment_ago_is_listed_after_durable(store: Database) -> None:
    recorder = Recorder(store, ME, history_limit=10)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    run = make_run("r-fresh", label="fresh")
    state_machine.start(run)

    await recorder.durable()  # no turn of the loop in between: durable writes it now
    summaries = await store.call(reads.list_runs, store, "s1", 10)
    assert [(s.run_id, s.status, s.label) for s in summaries] == [("r-fresh", "running", "fresh")]
    assert await store.call(reads.load_run, store, "r-fresh") == without_events(run)


async def test_a_touch_without_an_event_is_written_too(store: Database) -> None:
    recorder = Recorder(store, ME, history_limit=10)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    run = make_run("r1")
    state_machine.start(run)
    state_machine.start_child(run, run.children[0])
    await recorder.durable()
    run.children[0].pid = 31337
    run.children[0].start_time_probe = lambda: 42.5
    recorder.touch(run)
    await recorder.durable()

    rows = await query(store, "SELECT pid, create_time FROM attempts WHERE run_id = 'r1'")
    assert rows == [(31337, 42.5)]
    assert run.children[0].create_time == 42.5  # read once, remembered
    assert await query(store, "SELECT count(*) FROM events") == [(2,)]


async def test_a_run_whose_write_fails_is_reported_and_the_rest_of_its_batch_is_written(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write_run = writes.write_run

    def failing_write_run(db: sqlite3.Connection, instance_id: str, row: RunRow) -> None:
        if row.run_id == "r-bad":
            raise sqlite3.OperationalError("disk I/O error")
        real_write_run(db, instance_id, row)

    monkeypatch.setattr(writes, "write_run", failing_write_run)
    recorder = Recorder(store, ME, history_limit=10)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    good, bad, other = make_run("r-good"), make_run("r-bad", minute=1), make_run("r-o", minute=2)
    for run in (good, bad, other):  # one turn of the loop: one batch
        state_machine.start(run)

    await recorder.durable(good)
    await recorder.durable(other)
    with pytest.raises(RecordFailed) as failed:
        await recorder.durable(bad)
    assert failed.value.data == RunRef("r-bad")
    assert await query(store, "SELECT run_id FROM runs ORDER BY run_id") == [
        ("r-good",),
        ("r-o",),
    ]
    # Once a write carrying it succeeds, the run is reported written again.
    monkeypatch.setattr(writes, "write_run", real_write_run)
    state_machine.emit(bad, OutputEvent(index=0, text="later"))
    await recorder.durable(bad)
    assert await query(store, "SELECT run_id, last_seq FROM runs WHERE run_id = 'r-bad'") == [
        ("r-bad", 2)
    ]


async def test_nothing_of_a_run_is_written_while_it_is_unrecorded(store: Database) -> None:
    recorder = Recorder(store, ME, history_limit=10)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    run = make_run("r1")
    with recorder.unrecorded(run):
        state_machine.start(run)
        recorder.touch(run)
        await recorder.durable(run)
    await recorder.durable(run)
    assert await query(store, "SELECT count(*) FROM runs") == [(0,)]


async def test_a_lone_surrogate_that_slipped_through_is_stored_mended_with_its_batch(
    store: Database,
) -> None:
    recorder = Recorder(store, ME, history_limit=10)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    bad, good = make_run("r-bad", label="a\ud800b"), make_run("r-good", minute=1)
    state_machine.start(bad)
    state_machine.emit(bad, OutputEvent(index=0, text="x\udfff"))
    state_machine.start(good)
    await recorder.durable(bad)
    await recorder.durable(good)
    assert await query(store, "SELECT run_id, label FROM runs ORDER BY run_id") == [
        ("r-bad", "a\ufffdb"),
        ("r-good", None),
    ]
    [event] = await store.call(reads.events_after, store, "r-bad", 1)
    assert event.payload == OutputEvent(index=0, text="x\ufffd")


async def test_the_runs_a_write_pruned_are_handed_on_before_durable_returns(
    store: Database,
) -> None:
    recorder = Recorder(store, ME, history_limit=2)
    pruned: list[list[str]] = []
    recorder.on_pruned = lambda run_ids: pruned.append(list(run_ids))
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    for minute in range(2):
        completed_run(state_machine, f"r{minute}", minute=minute)
        await recorder.durable()
    assert pruned == []
    live = make_run("r-live", minute=-1)  # older, but live: never pruned
    state_machine.start(live)
    await recorder.durable()
    assert pruned == []  # r-live is live; nothing else is beyond the newest two

    completed_run(state_machine, "r2", minute=2)
    await recorder.durable()
    assert pruned == [["r0"]]
    assert await store.call(reads.load_run, store, "r0") is None


async def test_a_waiter_for_the_disk_resumes_in_the_first_turn_of_the_loop_after_the_commit(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The write prunes a run: its `on_pruned` is queued on the loop by the store's
    # thread as the write completes, ahead of the waiter's own wake-up. How many turns
    # pass between the two depends on when the store's thread runs (a loaded machine
    # may split them); from the wake-up on, the waiter must take exactly one turn.
    recorder = Recorder(store, ME, history_limit=1)
    turns = 0
    pruned_in: list[int] = []
    woken_in: list[int] = []
    recorder.on_pruned = lambda _run_ids: pruned_in.append(turns)
    set_done = recorder_module._set_done

    def noting_wake(waiter: asyncio.Future[None]) -> None:
        woken_in.append(turns)
        set_done(waiter)

    monkeypatch.setattr(recorder_module, "_set_done", noting_wake)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    completed_run(state_machine, "r0", minute=0)
    await recorder.durable()
    loop = asyncio.get_running_loop()
    ticking_on = True

    def tick() -> None:
        nonlocal turns
        turns += 1
        if ticking_on:
            loop.call_soon(tick)

    tick()
    woken_in.clear()
    completed_run(state_machine, "r1", minute=1)
    await recorder.durable()
    resumed_in = turns
    ticking_on = False

    assert len(pruned_in) == 1 and len(woken_in) == 1
    assert pruned_in[0] <= woken_in[0]  # the pruned runs are forgotten first
    assert resumed_in - woken_in[0] == 1  # then no extra hop: the next turn resumes it


async def test_pruning_a_session_walks_its_index_without_sorting_its_runs(
    store: Database,
) -> None:
    for sql, params in (
        (writes.BOUNDARY, ("s1", 99)),
        (writes.OLDER, ("s1", T0.isoformat(), *writes.LIVE)),
    ):
        plan = await query(store, f"EXPLAIN QUERY PLAN {sql}", *params)
        steps = " / ".join(str(step[-1]) for step in plan)
        assert "runs_by_session" in steps, sql
        assert "TEMP B-TREE" not in steps, sql


@pytest.mark.parametrize("created", [(0, 1, 2, 3), (0, 1, 1, 1), (1, 1, 1, 1), (0, 0, 1, 2)])
async def test_the_runs_beyond_the_history_limit_are_the_oldest_ties_broken_by_run_id(
    store: Database, created: tuple[int, ...]
) -> None:
    # Runs created at one moment on both sides of the limit: the newest by run_id stay.
    state_machine = RunStateMachine(clock=ticking())
    runs = [
        completed_run(state_machine, f"r{n}", minute=minute) for n, minute in enumerate(created)
    ]
    for run in runs:
        await save(store, run, limit=2)
    newest = sorted(runs, key=lambda run: (run.created_at, run.run_id), reverse=True)[:2]
    kept = await query(store, "SELECT run_id FROM runs ORDER BY run_id DESC")
    assert kept == [(run.run_id,) for run in sorted(newest, key=lambda r: r.run_id, reverse=True)]


async def test_idle_sessions_and_ended_server_records_are_pruned_at_start(store: Database) -> None:
    now = T0 + timedelta(days=100)
    old = T0  # 100 days before `now`
    state_machine = RunStateMachine(
        clock=ticking()
    )  # stamps near T0: every run here ended long ago...
    for n in range(30):  # thirty servers, each with its own default session, long gone
        instance = f"gone-{n}"
        await store.call(instances.register_instance, store, instance, 1000 + n, 1.0, old)
        await save(
            store, completed_run(state_machine, f"r{n}", session_id=f"s{n}"), instance=instance
        )
        await store.call(instances.end_instance, store, instance, old)
    # ...but these sessions are kept: a run of the last 30 days, or a live one.
    recent = completed_run(
        RunStateMachine(clock=lambda: now - timedelta(days=29)), "r-recent", "s-recent"
    )
    await save(store, recent)
    live = make_run("r-live", "s-live")  # created long ago, still running
    state_machine.start(live)
    await save(store, live, instance="gone-live-owner")
    await store.call(instances.register_instance, store, "gone-live-owner", 99, 1.0, old)
    await store.call(instances.end_instance, store, "gone-live-owner", old)
    await store.call(instances.register_instance, store, "other-live", 98, 1.0, old)  # not ended
    await store.call(instances.register_instance, store, ME, 97, 1.0, now)

    pruned = await store.call(instances.prune_stale, store, ME, now)

    assert pruned == instances.Pruned(sessions=30, runs=30, instances=30)
    assert sorted(pruned.run_ids) == sorted(f"r{n}" for n in range(30))
    sessions = await query(store, "SELECT DISTINCT session_id FROM runs ORDER BY 1")
    assert sessions == [("s-live",), ("s-recent",)]
    kept = await query(store, "SELECT instance_id FROM instances ORDER BY 1")
    assert kept == [("gone-live-owner",), (ME,), ("other-live",)]
    for table in ("attempts", "events"):
        left = await query(store, f"SELECT DISTINCT run_id FROM {table} ORDER BY 1")
        assert left == [("r-live",), ("r-recent",)], table
    # A second start finds nothing more to delete.
    assert await store.call(instances.prune_stale, store, ME, now) == instances.Pruned(0, 0, 0)


async def test_a_session_whose_old_run_ended_recently_is_kept(store: Database) -> None:
    now = T0 + timedelta(days=100)
    run = make_run("r-long", "s-long")  # created 100 days ago...
    state_machine = RunStateMachine(clock=lambda: now - timedelta(days=1))  # ...and ended yesterday
    state_machine.start(run)
    state_machine.transition(run, Cancelled("stopped"))
    await save(store, run)
    assert await store.call(instances.prune_stale, store, ME, now) == instances.Pruned(0, 0, 0)


# --- everything at once ------------------------------------------------------------------------


async def test_the_database_is_intact_after_a_full_history(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writes, "MAX_EVENTS_KEPT", 4)
    recorder = Recorder(store, "dead", history_limit=3)
    await register(store, "dead", DEAD_PID)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    for i in range(6):
        run = make_run(f"r{i}", children=2, minute=i)
        state_machine.start(run)
        for n in range(5):
            state_machine.emit(run, OutputEvent(index=0, text=str(n)))
        if i < 5:
            state_machine.transition(run, Cancelled("stopped"))
        await asyncio.sleep(0)
    await recorder.durable()
    await register(store, ME, MY_PID)
    interrupted, _ = await store.call(
        instances.recover, store, ME, alive_pids(), RunStateMachine(clock=ticking())
    )

    assert interrupted == ["r5"]
    ids = [s.run_id for s in await store.call(reads.list_runs, store, "s1", 10)]
    assert ids == ["r5", "r4", "r3"]
    assert await query(
        store, "SELECT run_id, count(*) FROM events GROUP BY run_id ORDER BY run_id"
    ) == [
        ("r3", 4),
        ("r4", 4),
        ("r5", 4),
    ]
    assert await pragma(store, "integrity_check") == "ok"
    assert await query(store, "PRAGMA foreign_key_check") == []


def test_records_are_stable_json_keys() -> None:
    run = make_run("r1")
    assert run_record(run) == {
        "run_id": "r1",
        "session_id": "s1",
        "kind": "single",
        "fingerprint": "sha256:v1:" + "0" * 64,
        "created_at": T0.isoformat(),
    }
    assert child_record(run.children[0]) == {"index": 0, "backend": "command"}


def test_an_agent_childs_prompt_head_is_kept_in_its_record_and_absent_from_older_records() -> None:
    run = make_run("r1", children=2)
    prompted, command = run.children
    prompted.prompt_head = "Review the diff"
    record = json.loads(json.dumps(child_record(prompted)))
    assert record["prompt_head"] == "Review the diff"
    assert child_from_record(record).prompt_head == "Review the diff"
    assert "prompt_head" not in child_record(command)  # none: the record is as before
    older = {k: v for k, v in record.items() if k != "prompt_head"}  # before it was kept
    assert child_from_record(older).prompt_head is None
