"""A state directory that cannot be used: the history falls back to memory, bounded as on disk."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from subagent_host.runs.state import Run, RunStateMachine
from subagent_host.store import reads, writes
from subagent_host.store.database import Database, open_database
from subagent_host.store.recorder import Recorder
from subagent_host.store.rows import run_row
from subagent_host.store.schema import DB_NAME, SCHEMA_VERSION
from subagent_host.values.events import OutputEvent
from tests.store.test_store import ME, completed_run, make_run, query, ticking

GARBAGE = b"this is not an SQLite database\n" * 64


@pytest.fixture
async def memory() -> AsyncIterator[Database]:
    store = await Database.in_memory()
    yield store
    await store.close()


def snapshot_tree(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under `root` (itself included) with its mode and, for a file, its bytes."""
    found: dict[str, tuple[int, bytes | None]] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        info = path.stat()
        found[str(path)] = (info.st_mode, path.read_bytes() if path.is_file() else None)
    return found


def under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "blocker").write_text("a file where a directory would go")
    return tmp_path / "blocker" / "state"


def with_a_corrupt_database(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / DB_NAME).write_bytes(GARBAGE)
    return state


def with_a_directory_for_a_database(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / DB_NAME).mkdir()
    return state


def with_a_newer_schema(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)  # the directory is ours (and tightened); the database is not
    db = sqlite3.connect(state / DB_NAME)  # rollback journal, mode 0644: not ours to change
    db.execute("CREATE TABLE future (x INTEGER)")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    (state / DB_NAME).chmod(0o644)
    return state


UNUSABLE: dict[str, tuple[Callable[[Path], Path], str]] = {
    "under-a-file": (under_a_file, "Not a directory"),
    "corrupt-database": (with_a_corrupt_database, "file is not a database"),
    "database-is-a-directory": (with_a_directory_for_a_database, "is not a regular file"),
    "newer-schema": (with_a_newer_schema, "newer than this server understands"),
}


@pytest.mark.parametrize("case", sorted(UNUSABLE))
async def test_an_unusable_state_dir_gives_a_memory_store_one_warning_and_is_left_as_it_was(
    tmp_path: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    make, why = UNUSABLE[case]
    state = make(tmp_path)
    before = snapshot_tree(tmp_path)
    caplog.set_level(logging.DEBUG)

    store = await open_database(state)
    try:
        assert (store.durable, store.persistence) == (False, "memory")
        await store.call(
            writes.save, store, ME, [run_row(make_run("r1"), [])], 100
        )  # usable all the same
        assert await store.call(reads.load_run, store, "r1") is not None
    finally:
        await store.close()

    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    message = warnings[0].getMessage()
    assert str(state) in message and why in message and "in memory only" in message
    assert snapshot_tree(tmp_path) == before


async def test_a_usable_state_dir_gives_a_durable_store_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store = await open_database(tmp_path / "state")
    try:
        assert (store.durable, store.persistence) == (True, "sqlite")
    finally:
        await store.close()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_memory_store_keeps_a_sessions_newest_runs_only(memory: Database) -> None:
    recorder = Recorder(memory, ME, history_limit=3)
    pruned: list[str] = []
    recorder.on_pruned = pruned.extend
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    live = make_run("r-live", minute=-1)  # the oldest, but live: never pruned
    state_machine.start(live)
    runs: list[Run] = []
    for minute in range(40):
        runs.append(completed_run(state_machine, f"r{minute:02}", minute=minute))
        await recorder.durable()

    listed = await memory.call(reads.list_runs, memory, "s1", 100)
    assert [s.run_id for s in listed] == ["r39", "r38", "r37", "r-live"]
    assert sorted(pruned) == [run.run_id for run in runs[:37]]
    # Nothing of a pruned run is held: not its attempts, not its events.
    for table in ("runs", "attempts", "events"):
        held = {r for (r,) in await query(memory, f"SELECT DISTINCT run_id FROM {table}")}
        assert held == {"r39", "r38", "r37", "r-live"}, table


async def test_a_memory_store_bounds_each_runs_events_as_the_disk_does(
    memory: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writes, "MAX_EVENTS_KEPT", 5)
    recorder = Recorder(memory, ME, history_limit=100)
    state_machine = RunStateMachine(clock=ticking(), listener=recorder)
    run = make_run("r1")
    state_machine.start(run)
    for n in range(50):
        state_machine.emit(run, OutputEvent(index=0, text=f"line {n}"))
        await recorder.durable()

    seqs = [seq for (seq,) in await query(memory, "SELECT seq FROM events ORDER BY seq")]
    assert seqs == list(range(47, 52))
    after = await memory.call(reads.events_after, memory, "r1", 0)
    assert after[-1].payload == OutputEvent(index=0, text="line 49")
