"""A read-only view of a state directory's runs, across sessions and servers.

For the terminal subcommands (`runs`, `show`, `logs`, `watch`): they read what servers
have recorded without being one. The database is opened read-only (`mode=ro`): in WAL
mode such a reader never blocks a writer and sees each committed transaction whole,
however many servers write (protocol.md §13). It never creates, migrates or changes the
database; one of a newer schema is refused like a server refuses it.

A run is found by its id or by a unique prefix of at least `MIN_PREFIX` characters, the
rule `status` and `stop` follow (protocol.md §4), but in every session.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Final

import attrs

from subagent_host.runs.state import Run, RunEvent
from subagent_host.state_layout import database_problem
from subagent_host.store.reads import MIN_PREFIX as MIN_PREFIX
from subagent_host.store.reads import assemble
from subagent_host.store.rows import event_from_record
from subagent_host.store.schema import BUSY_TIMEOUT_MS, DB_NAME, check_version

ACTIVITY_SCAN: Final = 200
"""Events looked at, newest first, for each child's latest activity."""
OUTPUT_SCAN: Final = 400
"""Streamed `output` events joined for a running child's output tail."""


def sqlite_library() -> tuple[str, tuple[int, int, int]]:
    """The SQLite library this Python links: its version, as text and as numbers."""
    return sqlite3.sqlite_version, sqlite3.sqlite_version_info


class BrowseError(Exception):
    """The state directory cannot be read, or a run reference matches no run or several:
    the message is one line for a person."""


class NoHistory(BrowseError):
    """The state directory has no database: no server has recorded a run there."""


@attrs.frozen
class Owner:
    """The server instance that ran (or runs) a run, as it registered itself."""

    instance_id: str
    pid: int
    create_time: float
    """The process's start time (psutil's), so a reused pid is not taken for it."""
    ended_at: datetime | None
    """When that server ended cleanly; None while it runs or if it died."""


@attrs.frozen
class LaunchSummary:
    """What one child was launched as, summed up from its stored projection for a person."""

    backend: str
    argv: tuple[str, ...]
    """The argv it executed (a `command` child's own command)."""
    model: str | None
    agent: str | None = None
    """The agent definition it ran (protocol.md §18), if any."""


@attrs.frozen
class BrowsedRun:
    """One run of the listing: the run as last recorded, and who ran it."""

    run: Run
    instance_id: str


class StateBrowser:
    """Read-only queries on one state directory's database (synchronous: a terminal
    command has nothing else to do while it reads; `watch` calls it off its loop)."""

    def __init__(self, db: sqlite3.Connection, state_dir: Path) -> None:
        self._db = db
        self.state_dir = state_dir

    @classmethod
    def open(cls, state_dir: Path) -> StateBrowser:
        path = state_dir / DB_NAME
        if not path.is_file():
            raise NoHistory(f"no runs recorded in {state_dir} (no {DB_NAME} there)")
        # Even read-only, SQLite writes the -shm file: never through a planted symlink.
        if (problem := database_problem(state_dir, path.lstat().st_uid)) is not None:
            raise BrowseError(f"cannot read {path}: {problem}")
        try:
            db = sqlite3.connect(
                f"{path.as_uri()}?mode=ro",
                uri=True,
                isolation_level=None,
                timeout=BUSY_TIMEOUT_MS / 1000,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise BrowseError(f"cannot read {path}: {exc}") from exc
        try:
            check_version(db)
        except Exception as exc:
            db.close()
            raise BrowseError(f"cannot read {path}: {exc}") from exc
        return cls(db, state_dir)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> StateBrowser:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: what is read inside it is of one committed moment."""
        try:
            self._db.execute("BEGIN")
            try:
                yield self._db
            finally:
                self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise BrowseError(f"cannot read the run history: {exc}") from exc

    def runs(self, session_id: str | None = None, limit: int = 20) -> list[BrowsedRun]:
        """The newest runs first (of one session, or of all), each as last recorded."""
        where, args = ("WHERE session_id = ?", (session_id,)) if session_id else ("", ())
        with self._snapshot() as db:
            rows = db.execute(
                f"SELECT run_id, instance_id, record FROM runs {where}"
                " ORDER BY created_at DESC, run_id DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
            return [
                BrowsedRun(assemble(db, run_id, record), instance_id)
                for run_id, instance_id, record in rows
            ]

    def find(self, reference: str | None) -> Run:
        """The run with this id, or the one whose id starts with this prefix; None: the
        newest run (of any session)."""
        if reference is None:
            newest = self.runs(limit=1)
            if not newest:
                raise BrowseError(f"no runs recorded in {self.state_dir}")
            return newest[0].run
        with self._snapshot() as db:
            found = db.execute(
                "SELECT run_id, record FROM runs WHERE run_id = ?", (reference,)
            ).fetchone()
            if found is None and len(reference) >= MIN_PREFIX:
                matches = db.execute(
                    "SELECT run_id, record FROM runs WHERE substr(run_id, 1, ?) = ? LIMIT 2",
                    (len(reference), reference),
                ).fetchall()
                if len(matches) > 1:
                    raise BrowseError(
                        f"{reference!r} is the start of more than one run id: give more of it"
                    )
                found = matches[0] if matches else None
            if found is None:
                hint = (
                    f" (a run id prefix needs at least {MIN_PREFIX} characters)"
                    if len(reference) < MIN_PREFIX
                    else ""
                )
                raise BrowseError(f"no run {reference!r} in {self.state_dir}{hint}")
            return assemble(db, found[0], found[1])

    def load(self, run_id: str) -> Run | None:
        """The run as last recorded now (None once it has been pruned)."""
        with self._snapshot() as db:
            found = db.execute("SELECT record FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            return assemble(db, run_id, found[0]) if found else None

    def events_after(self, run_id: str, seq: int, limit: int = 1000) -> list[RunEvent]:
        """The run's recorded events after `seq`, in order (at most `limit`)."""
        with self._snapshot() as db:
            rows = db.execute(
                "SELECT seq, record FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (run_id, seq, limit),
            ).fetchall()
        return [event_from_record(s, json.loads(record)) for s, record in rows]

    def events_of(
        self, run_id: str, types: Sequence[str], newest: int | None = None
    ) -> list[RunEvent]:
        """The run's recorded events of these `type`s, in order: every one, or its `newest`
        (`show`'s conversation of an interactive child, the permissions it waits on)."""
        marks = ", ".join("?" for _ in types)
        with self._snapshot() as db:
            rows = db.execute(
                "SELECT seq, record FROM (SELECT seq, record FROM events WHERE run_id = ?"
                f" AND json_extract(record, '$.type') IN ({marks}) ORDER BY seq DESC LIMIT ?)"
                " ORDER BY seq",
                (run_id, *types, -1 if newest is None else newest),
            ).fetchall()
        return [event_from_record(s, json.loads(record)) for s, record in rows]

    def run_with_events(
        self, run_id: str, seq: int, limit: int = 1000
    ) -> tuple[Run | None, list[RunEvent]]:
        """The run as last recorded and its events after `seq` (at most `limit`), read at one
        committed moment: a run's record is written with (or after) its events, so every
        event read here is reflected in the run read with it (`logs -f` relies on it)."""
        with self._snapshot() as db:
            found = db.execute("SELECT record FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            rows = db.execute(
                "SELECT seq, record FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (run_id, seq, limit),
            ).fetchall()
            run = assemble(db, run_id, found[0]) if found else None
        return run, [event_from_record(s, json.loads(record)) for s, record in rows]

    def owner(self, run_id: str) -> Owner | None:
        """The server instance that recorded the run."""
        with self._snapshot() as db:
            found = db.execute(
                "SELECT i.instance_id, i.pid, i.create_time, i.ended_at FROM runs AS r"
                " JOIN instances AS i ON i.instance_id = r.instance_id WHERE r.run_id = ?",
                (run_id,),
            ).fetchone()
        if found is None:
            return None
        instance_id, pid, create_time, ended_at = found
        return Owner(
            instance_id, pid, create_time, datetime.fromisoformat(ended_at) if ended_at else None
        )

    def journal_mode(self) -> str:
        """The database's journal mode: `wal` as a server sets it, unless the file system
        cannot give it (then readers and writers block one another)."""
        return str(self._db.execute("PRAGMA journal_mode").fetchone()[0])

    def data_version(self) -> int:
        """Changes when any connection commits a change to the database: `watch` reads
        again only then (`PRAGMA data_version`)."""
        try:
            return int(self._db.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error as exc:
            raise BrowseError(f"cannot read the run history: {exc}") from exc

    def latest_activity(self, run_id: str, scan: int = ACTIVITY_SCAN) -> dict[int, str]:
        """Each child's newest `activity` text, else the text of its newest `output` event,
        among the run's newest `scan` events (what `watch` shows a child doing)."""
        with self._snapshot() as db:
            rows = db.execute(
                "SELECT json_extract(record, '$.type'), json_extract(record, '$.fields.index'),"
                " json_extract(record, '$.fields.text') FROM events WHERE run_id = ?"
                " AND json_extract(record, '$.type') IN ('activity', 'output')"
                " ORDER BY seq DESC LIMIT ?",
                (run_id, scan),
            ).fetchall()
        activity: dict[int, str] = {}
        output: dict[int, str] = {}
        for kind, index, text in rows:  # newest first: the first of each kind wins
            if isinstance(index, int) and isinstance(text, str) and text.strip():
                (activity if kind == "activity" else output).setdefault(index, text)
        return {**output, **activity}

    def streamed_output(
        self, run_id: str, index: int | None = None, events: int = OUTPUT_SCAN
    ) -> str:
        """The text of the newest `events` streamed `output` events of one child (of every
        child with `index` None), in order: the tail of what a running run printed (a
        finished child's output is in its record)."""
        child = "" if index is None else " AND json_extract(record, '$.fields.index') = ?"
        with self._snapshot() as db:
            rows = db.execute(
                "SELECT text FROM (SELECT seq, json_extract(record, '$.fields.text') AS text"
                " FROM events WHERE run_id = ? AND json_extract(record, '$.type') = 'output'"
                f"{child} ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                (run_id, *(() if index is None else (index,)), events),
            ).fetchall()
        return "".join(text for (text,) in rows if isinstance(text, str))

    def launches(self, run_id: str) -> dict[int, LaunchSummary]:
        """What each child was launched as, from its stored projection (protocol.md §15):
        backend, argv, model, agent. Shown to a person, not checked against its digest."""
        with self._snapshot() as db:
            rows = db.execute(
                "SELECT idx, json_extract(projection, '$.backend'),"
                " json_extract(projection, '$.argvTemplate'), json_extract(projection, '$.model'),"
                " json_extract(projection, '$.agent.name')"
                " FROM children WHERE run_id = ? AND json_valid(projection)",
                (run_id,),
            ).fetchall()
        return {
            index: LaunchSummary(str(backend), tuple(json.loads(argv or "[]")), model, agent)
            for index, backend, argv, model, agent in rows
        }
