"""What the store records about runs, in SQL. Every function here runs on the store's thread.

A run is a `runs` row (its own fields as JSON, plus the columns queries need),
one `attempts` row per attempt of each child (the newest is the child as a
snapshot shows it), one `children` row per child (its launch projection, once
resume lands), and its newest events. Sessions keep their newest runs only.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from subagent_host.backends.mending import mend
from subagent_host.backends.sessions import Seal
from subagent_host.runs.records import (
    child_from_record,
    child_record,
    run_from_record,
    run_record,
)
from subagent_host.runs.state import (
    MAX_EVENTS_KEPT,
    STEP_RUNNING,
    TERMINAL,
    ChildRun,
    Run,
    RunBook,
    RunEvent,
    RunStatus,
)
from subagent_host.runs.store import Store
from subagent_host.values.facts import RunSummary

logger = logging.getLogger(__name__)

LIVE: Final = (str(RunStatus.QUEUED), str(RunStatus.RUNNING))
# A session none of whose runs was created or ended within this long (and none of
# which is live) is deleted at a server's start: sessions are made per connection
# by default, and `--history-limit` bounds each one, not how many there are.
SESSION_RETENTION: Final = timedelta(days=30)


@attrs.frozen
class ChildRow:
    """One child attempt as it is written: its record and the columns recovery reads."""

    index: int
    attempt: int
    status: str
    pid: int | None
    pgid: int | None
    create_time: float | None
    record: str
    start_time_probe: Callable[[], float | None] | None = None
    """Reads the process's start time (off the loop) when it is not known yet."""
    child: ChildRun | None = None


@attrs.frozen
class RunRow:
    """One run as it is written, with the events appended since the last write."""

    run_id: str
    session_id: str
    kind: str
    status: str
    created_at: str
    ended_at: str | None
    label: str | None
    last_seq: int
    record: str
    children: tuple[ChildRow, ...]
    events: tuple[tuple[int, str], ...]
    first_retained_seq: int = 1
    """Older events are deleted: the run's events stay bounded on disk as in memory."""


def run_row(run: Run, events: Iterable[RunEvent]) -> RunRow:
    """Serialise a run as it is now (on the loop: the objects keep changing)."""
    return RunRow(
        run_id=run.run_id,
        session_id=run.session_id,
        kind=str(run.kind),
        status=str(run.status),
        created_at=run.created_at.isoformat(),
        ended_at=run.ended_at.isoformat() if run.ended_at else None,
        label=run.label,
        last_seq=run.last_seq,
        record=_dumps(run_record(run)),
        children=tuple(_child_row(child) for child in run.children),
        events=tuple(
            (event.seq, _dumps(event_record(event)))
            for event in events
            if event.seq >= run.first_retained_seq  # dropped within this turn already
        ),
        first_retained_seq=run.first_retained_seq,
    )


def _child_row(child: ChildRun) -> ChildRow:
    probe = child.start_time_probe if child.create_time is None and child.pid else None
    return ChildRow(
        index=child.index,
        attempt=child.attempt,
        status=str(child.status),
        pid=child.pid,
        pgid=child.pgid,
        create_time=child.create_time,
        record=_dumps(child_record(child)),
        start_time_probe=probe,
        child=child if probe else None,
    )


def _create_time(row: ChildRow) -> float | None:
    """The row's process start time, read now if it was not known (store thread)."""
    if row.create_time is not None or row.start_time_probe is None:
        return row.create_time
    created = row.start_time_probe()
    if created is not None and row.child is not None:
        row.child.create_time = created  # remembered: read once per child, not per write
    return created


def event_record(event: RunEvent) -> dict[str, Any]:
    return {"type": event.type, "at": event.at.isoformat(), "fields": dict(event.fields)}


def event_from_record(seq: int, record: dict[str, Any]) -> RunEvent:
    return RunEvent(
        seq=seq,
        type=record["type"],
        at=datetime.fromisoformat(record["at"]),
        fields=record["fields"],
    )


# --- writing ---------------------------------------------------------------------------


@attrs.define
class Extras:
    """Workflow records written with the runs: definitions, and children's final texts."""

    workflows: list[tuple[str, str]] = attrs.Factory(list)
    texts: list[tuple[str, int, str]] = attrs.Factory(list)


@attrs.define
class Saved:
    """What a write did besides writing: runs it could not write, runs its prune deleted."""

    failed: list[str] = attrs.Factory(list)
    pruned: list[str] = attrs.Factory(list)


def save(
    store: Store,
    instance_id: str,
    rows: Sequence[RunRow],
    history_limit: int,
    projections: Sequence[tuple[str, int, str, str]] = (),
    extras: Extras | None = None,
) -> Saved:
    """Write runs as they are now, with their new events and launch projections; prune.

    One transaction for the batch. If it fails, each run is tried again in its
    own (text that is not UTF-8 mended to U+FFFD on the way), so one bad run
    costs no other its write. Says which runs still could not be written (the
    recorder tells whoever waits on them) and which runs the prune deleted
    (whoever keeps runs in memory must forget them too, or it would still
    answer for them).
    """
    extras = extras or Extras()
    try:
        return Saved(
            pruned=_save_batch(store, instance_id, rows, history_limit, projections, extras)
        )
    except Exception as exc:  # noqa: BLE001 - retried run by run below
        logger.warning("a write of %d runs failed (%s); writing them one by one", len(rows), exc)
    saved = Saved()
    for row in rows:
        mine = [p for p in projections if p[0] == row.run_id]
        own = Extras(
            workflows=[w for w in extras.workflows if w[0] == row.run_id],
            texts=[t for t in extras.texts if t[0] == row.run_id],
        )
        try:
            try:
                saved.pruned += _save_batch(store, instance_id, [row], history_limit, mine, own)
            except UnicodeEncodeError:
                # A lone surrogate slipped past every check (they are mended where
                # text enters): store U+FFFD rather than lose the run.
                logger.warning("run %s held text that is not UTF-8: stored mended", row.run_id)
                saved.pruned += _save_batch(
                    store, instance_id, [_mended(row)], history_limit, *_mended_extras(mine, own)
                )
        except Exception as exc:  # noqa: BLE001 - reported per run
            logger.error("run %s could not be written to the run history: %s", row.run_id, exc)
            saved.failed.append(row.run_id)
    return saved


def _save_batch(
    store: Store,
    instance_id: str,
    rows: Sequence[RunRow],
    history_limit: int,
    projections: Sequence[tuple[str, int, str, str]],
    extras: Extras,
) -> list[str]:
    """Write `rows` in one transaction and prune their sessions; the ids pruned."""
    with store.immediate() as db:
        for row in rows:
            _write_run(db, instance_id, row)
        db.executemany(
            "INSERT OR REPLACE INTO children (run_id, idx, projection, projection_digest)"
            " VALUES (?, ?, ?, ?)",
            projections,
        )
        db.executemany(
            "INSERT OR REPLACE INTO workflows (run_id, definition) VALUES (?, ?)",
            extras.workflows,
        )
        db.executemany(
            "INSERT OR REPLACE INTO workflow_texts (run_id, idx, text) VALUES (?, ?, ?)",
            extras.texts,
        )
        # A session grows only when a run is new (its first event is in this write).
        deleted: list[str] = []
        for session_id in {row.session_id for row in rows if row.events and row.events[0][0] == 1}:
            deleted += _prune(db, session_id, history_limit)
    return deleted


def _mended(row: RunRow) -> RunRow:
    """`row` with every text mended (ids are ours, and plain ASCII)."""
    return attrs.evolve(
        row,
        label=mend(row.label) if row.label is not None else None,
        record=mend(row.record),
        children=tuple(attrs.evolve(child, record=mend(child.record)) for child in row.children),
        events=tuple((seq, mend(record)) for seq, record in row.events),
    )


def _mended_extras(
    projections: Sequence[tuple[str, int, str, str]], extras: Extras
) -> tuple[list[tuple[str, int, str, str]], Extras]:
    return (
        [(run_id, index, mend(stored), digest) for run_id, index, stored, digest in projections],
        Extras(
            workflows=[(run_id, mend(definition)) for run_id, definition in extras.workflows],
            texts=[(run_id, index, mend(text)) for run_id, index, text in extras.texts],
        ),
    )


def _write_run(db: sqlite3.Connection, instance_id: str, row: RunRow) -> None:
    db.execute(
        "INSERT INTO runs (run_id, session_id, instance_id, kind, status, created_at,"
        " ended_at, label, last_seq, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (run_id) DO UPDATE SET status = excluded.status,"
        " instance_id = excluded.instance_id,"
        " ended_at = excluded.ended_at, last_seq = excluded.last_seq, record = excluded.record",
        (
            row.run_id,
            row.session_id,
            instance_id,
            row.kind,
            row.status,
            row.created_at,
            row.ended_at,
            row.label,
            row.last_seq,
            row.record,
        ),
    )
    db.executemany(
        "INSERT INTO attempts (run_id, idx, attempt, status, pid, pgid, create_time, record)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, idx, attempt) DO UPDATE SET"
        " status = excluded.status, pid = excluded.pid, pgid = excluded.pgid,"
        " create_time = coalesce(excluded.create_time, attempts.create_time),"
        " record = excluded.record",
        [
            (
                row.run_id,
                child.index,
                child.attempt,
                child.status,
                child.pid,
                child.pgid,
                _create_time(child),
                child.record,
            )
            for child in row.children
        ],
    )
    if row.events:
        db.executemany(
            "INSERT OR REPLACE INTO events (run_id, seq, record) VALUES (?, ?, ?)",
            [(row.run_id, seq, record) for seq, record in row.events],
        )
        # Bounded per run as in memory, by count and by bytes (EventLog). The count
        # also holds for a run that came from disk, whose older events are not in memory.
        first_kept = max(row.first_retained_seq, row.last_seq - MAX_EVENTS_KEPT + 1)
        if first_kept > 1:
            db.execute("DELETE FROM events WHERE run_id = ? AND seq < ?", (row.run_id, first_kept))


def _prune(db: sqlite3.Connection, session_id: str, keep: int) -> list[str]:
    """Keep a session's newest `keep` runs; older ones go, unless they are still live.

    Returns the ids of the runs deleted.
    """
    over = db.execute(  # one index probe: mostly there is nothing to delete
        "SELECT 1 FROM runs WHERE session_id = ? ORDER BY created_at DESC, run_id DESC"
        " LIMIT 1 OFFSET ?",
        (session_id, keep),
    ).fetchone()
    if over is None:
        return []
    deleted = [
        run_id
        for (run_id,) in db.execute(
            "SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM runs"
            " WHERE session_id = ? ORDER BY created_at DESC, run_id DESC LIMIT -1 OFFSET ?)"
            " AND status NOT IN (?, ?)",
            (session_id, keep, *LIVE),
        )
    ]
    db.executemany("DELETE FROM runs WHERE run_id = ?", [(run_id,) for run_id in deleted])
    return deleted


# --- reading ---------------------------------------------------------------------------


def list_runs(store: Store, session_id: str, limit: int) -> list[RunSummary]:
    """This session's runs, newest first (as last written: see `RunCatalog.summaries`)."""
    rows = store.db.execute(
        "SELECT run_id, kind, status, created_at, ended_at, label FROM runs"
        " WHERE session_id = ? ORDER BY created_at DESC, run_id DESC LIMIT ?",
        (session_id, limit),
    ).fetchall()
    return [
        RunSummary(
            run_id=run_id,
            kind=kind,
            status=status,
            created_at=datetime.fromisoformat(created_at),
            ended_at=datetime.fromisoformat(ended_at) if ended_at else None,
            label=label,
        )
        for run_id, kind, status, created_at, ended_at, label in rows
    ]


def load_run(store: Store, run_id: str) -> Run | None:
    """A run as it was last written, with its children's newest attempts (no events)."""
    db = store.db
    found = db.execute("SELECT record FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if found is None:
        return None
    return _assemble(db, run_id, found[0])


def _assemble(db: sqlite3.Connection, run_id: str, record: str) -> Run:
    children = [
        child_from_record(json.loads(child))
        for (child,) in db.execute(
            "SELECT record FROM attempts AS a WHERE run_id = ? AND attempt ="
            " (SELECT max(attempt) FROM attempts WHERE run_id = a.run_id AND idx = a.idx)"
            " ORDER BY idx",
            (run_id,),
        )
    ]
    return run_from_record(json.loads(record), children)


def events_after(store: Store, run_id: str, seq: int) -> list[RunEvent]:
    rows = store.db.execute(
        "SELECT seq, record FROM events WHERE run_id = ? AND seq > ? ORDER BY seq",
        (run_id, seq),
    ).fetchall()
    return [event_from_record(s, json.loads(record)) for s, record in rows]


def run_ids_with_prefix(store: Store, session_id: str, prefix: str, limit: int = 2) -> list[str]:
    """Run ids of this session starting with `prefix` (at most `limit`)."""
    # substr, not LIKE: LIKE ignores case and treats % and _ as wildcards.
    rows = store.db.execute(
        "SELECT run_id FROM runs WHERE session_id = ? AND substr(run_id, 1, ?) = ? LIMIT ?",
        (session_id, len(prefix), prefix, limit),
    ).fetchall()
    return [run_id for (run_id,) in rows]


def load_workflow(store: Store, run_id: str) -> tuple[str | None, dict[int, str]]:
    """A workflow's stored definition (None if there is none) and its children's texts."""
    db = store.db
    found = db.execute("SELECT definition FROM workflows WHERE run_id = ?", (run_id,)).fetchone()
    texts = dict(
        db.execute("SELECT idx, text FROM workflow_texts WHERE run_id = ?", (run_id,)).fetchall()
    )
    return (found[0] if found else None), texts


def load_projection(store: Store, run_id: str, index: int) -> tuple[str | None, str | None]:
    """A child's stored launch projection and its digest (None, None if there is none)."""
    found = store.db.execute(
        "SELECT projection, projection_digest FROM children WHERE run_id = ? AND idx = ?",
        (run_id, index),
    ).fetchone()
    return (found[0], found[1]) if found else (None, None)


def run_owner(store: Store, run_id: str) -> str | None:
    found = store.db.execute("SELECT instance_id FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return found[0] if found else None


# --- server instances and recovery ---------------------------------------------------


@attrs.frozen
class Leftover:
    """A process an interrupted run may have left: check it before touching it."""

    run_id: str
    pid: int
    create_time: float | None


def register_instance(
    store: Store, instance_id: str, pid: int, create_time: float, now: datetime
) -> None:
    with store.immediate() as db:
        db.execute(
            "INSERT INTO instances (instance_id, pid, create_time, started_at) VALUES (?, ?, ?, ?)",
            (instance_id, pid, create_time, now.isoformat()),
        )


def end_instance(store: Store, instance_id: str, now: datetime) -> None:
    with store.immediate() as db:
        db.execute(
            "UPDATE instances SET ended_at = ? WHERE instance_id = ?",
            (now.isoformat(), instance_id),
        )


def recover(
    store: Store,
    instance_id: str,
    is_alive: Callable[[int, float], bool],
    book: RunBook,
    seal: Callable[[ChildRun], Seal | None] | None = None,
) -> tuple[list[str], list[Leftover]]:
    """Mark runs of server instances that are gone `interrupted`, once; say what they left.

    `seal` takes the digest of an interrupted child's session file as it is found now.

    One immediate transaction: a second server starting at the same moment
    waits for it, then finds nothing left to mark. An instance counts as gone
    when no process has its pid and start time; a live one's runs are its own.
    """
    interrupted: list[str] = []
    leftovers: list[Leftover] = []
    with store.immediate() as db:
        live = {instance_id}
        gone: dict[str, int] = {}
        for other, pid, create_time, ended_at in db.execute(
            "SELECT instance_id, pid, create_time, ended_at FROM instances WHERE instance_id != ?",
            (instance_id,),
        ).fetchall():
            if ended_at is None and is_alive(pid, create_time):
                live.add(other)  # another server on this state directory: its runs are its own
            else:
                gone[other] = pid
        for run_id, owner, record in db.execute(
            "SELECT run_id, instance_id, record FROM runs WHERE status IN (?, ?)", LIVE
        ).fetchall():
            if owner in live:
                continue
            reason = (
                f"server-died: the server process {gone[owner]} ended before the run did"
                if owner in gone
                else "server-died: the server that ran it is unknown to this state directory"
            )
            run = _assemble(db, run_id, record)
            leftovers += [
                Leftover(run_id, pid, create_time)
                for pid, create_time in db.execute(
                    "SELECT pid, create_time FROM attempts WHERE run_id = ? AND pid IS NOT NULL"
                    " AND status IN (?, ?)",
                    (run_id, *LIVE),
                )
            ]
            db.executemany(
                "INSERT INTO cleanups (run_id, pid, create_time) VALUES (?, ?, ?)",
                [
                    (run_id, left.pid, left.create_time)
                    for left in leftovers
                    if left.run_id == run_id
                ]
                or [(run_id, None, None)],  # no pid on record: the marker scan still runs
            )
            first_new_seq = run.last_seq + 1
            _interrupt(book, run, reason, seal)
            _write_run(db, owner, run_row(run, [e for e in run.events if e.seq >= first_new_seq]))
            interrupted.append(run_id)
        for other in gone:
            db.execute(
                "UPDATE instances SET ended_at = coalesce(ended_at, ?) WHERE instance_id = ?",
                (book.now().isoformat(), other),
            )
    return interrupted, leftovers


@attrs.frozen
class Pruned:
    """What `prune_stale` deleted."""

    sessions: int
    runs: int
    instances: int


def prune_stale(store: Store, instance_id: str, now: datetime) -> Pruned:
    """Delete sessions idle for `SESSION_RETENTION` and the rows of ended server processes.

    Called at a server's start, after `recover` (which marks the instances that
    are gone as ended). A session goes with all its runs when none of them was
    created or ended since `now - SESSION_RETENTION` and none is live. An
    instance's row goes once it has ended, unless a live run still names it
    (none should once recovery has run; a run whose owner is unknown counts as a
    dead server's anyway). Live instances, and this one, are kept.
    """
    cutoff = (now - SESSION_RETENTION).isoformat()
    with store.immediate() as db:
        stale = [
            session_id
            for (session_id,) in db.execute(
                "SELECT session_id FROM runs GROUP BY session_id"
                " HAVING max(coalesce(ended_at, created_at)) < ?"
                " AND sum(status IN (?, ?)) = 0",
                (cutoff, *LIVE),
            )
        ]
        runs = 0
        for session_id in stale:
            runs += db.execute("DELETE FROM runs WHERE session_id = ?", (session_id,)).rowcount
        instances = db.execute(
            "DELETE FROM instances WHERE instance_id != ? AND ended_at IS NOT NULL"
            " AND instance_id NOT IN (SELECT instance_id FROM runs WHERE status IN (?, ?))",
            (instance_id, *LIVE),
        ).rowcount
    return Pruned(sessions=len(stale), runs=runs, instances=instances)


def pending_cleanups(store: Store) -> tuple[list[str], list[Leftover]]:
    """Interrupted runs whose leftover processes no server has finished ending yet."""
    rows = store.db.execute("SELECT run_id, pid, create_time FROM cleanups").fetchall()
    run_ids = sorted({run_id for run_id, _, _ in rows})
    leftovers = [Leftover(run_id, pid, ct) for run_id, pid, ct in rows if pid is not None]
    return run_ids, leftovers


def cleanup_pending(store: Store, run_id: str) -> bool:
    """True while a server is still ending what this interrupted run left."""
    found = store.db.execute("SELECT 1 FROM cleanups WHERE run_id = ? LIMIT 1", (run_id,))
    return found.fetchone() is not None


def finish_cleanups(store: Store, run_ids: Sequence[str]) -> None:
    with store.immediate() as db:
        db.executemany("DELETE FROM cleanups WHERE run_id = ?", [(r,) for r in run_ids])


def seal_interrupted(
    store: Store, run_ids: Sequence[str], seal: Callable[[ChildRun], Seal | None]
) -> None:
    """Seal the session files of these runs' interrupted newest attempts as they are now."""
    with store.immediate() as db:
        for run_id in run_ids:
            rows = db.execute(
                "SELECT idx, attempt, record FROM attempts AS a WHERE run_id = ? AND status = ?"
                " AND attempt = (SELECT max(attempt) FROM attempts WHERE run_id = a.run_id"
                " AND idx = a.idx)",
                (run_id, str(RunStatus.INTERRUPTED)),
            ).fetchall()
            for index, attempt, record in rows:
                child = child_from_record(json.loads(record))
                found = seal(child)
                if found is None or found.digest == child.session_digest:
                    continue
                child.session_digest, child.session_digest_source = found.digest, found.source
                db.execute(
                    "UPDATE attempts SET record = ? WHERE run_id = ? AND idx = ? AND attempt = ?",
                    (_dumps(child_record(child)), run_id, index, attempt),
                )


def _interrupt(
    book: RunBook, run: Run, reason: str, seal: Callable[[ChildRun], Seal | None] | None
) -> None:
    for child in run.children:
        if child.status not in TERMINAL:
            found = seal(child) if seal is not None else None
            if found is not None:
                child.session_digest, child.session_digest_source = found.digest, found.source
            book.transition_child(run, child, RunStatus.INTERRUPTED, reason=reason)
    for step in run.workflow.steps if run.workflow is not None else ():
        if step.status == STEP_RUNNING:  # the step a dead server was carrying out
            step.status = str(RunStatus.INTERRUPTED)
    book.transition(run, RunStatus.INTERRUPTED, reason=reason)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
