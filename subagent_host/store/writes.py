"""Writing runs: one transaction per batch, retried run by run; each session pruned.

Every function here runs on the store's thread.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from typing import Final

import attrs

from subagent_host.backends.lone_surrogates import mend
from subagent_host.runs.state import MAX_EVENTS_KEPT, RunStatus
from subagent_host.store.database import Database
from subagent_host.store.rows import RunRow, create_time
from subagent_host.values.plurals import plural

logger = logging.getLogger(__name__)

LIVE: Final = (str(RunStatus.QUEUED), str(RunStatus.RUNNING))
# The creation times of a session's `keep`-th and next newest runs, along its
# index (runs_by_session: created_at DESC, then run_id ascending). A second row
# means more than `keep` runs. No `run_id DESC` here: it goes against the index,
# and SQLite would sort the session's runs in a temporary B-tree at every write
# that adds a run.
BOUNDARY: Final = (
    "SELECT created_at FROM runs WHERE session_id = ? ORDER BY created_at DESC LIMIT 2 OFFSET ?"
)
# Over the limit, with the `keep`-th newest run created later than the next one
# (nearly always): the runs beyond the limit are exactly those created before
# it, whatever order runs created at one moment take among themselves.
OLDER: Final = (
    "SELECT run_id FROM runs WHERE session_id = ? AND created_at < ? AND status NOT IN (?, ?)"
)
# Runs created at one moment on both sides of the limit: ties are broken by
# run_id, newest first, as `list` shows them (a sort, for this rare case).
BEYOND: Final = (
    "SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM runs"
    " WHERE session_id = ? ORDER BY created_at DESC, run_id DESC LIMIT -1 OFFSET ?)"
    " AND status NOT IN (?, ?)"
)


@attrs.define
class Extras:
    """Workflow records written with the runs: definitions, and children's final texts."""

    workflows: list[tuple[str, str]] = attrs.Factory(list)
    texts: list[tuple[str, int, str]] = attrs.Factory(list)
    reservation: tuple[str, str] | None = None
    """The run ids this server reserves (a `meta` key and its JSON value; run_ids.py)."""


@attrs.define
class Saved:
    """What a write did besides writing: runs it could not write, runs its prune deleted."""

    failed: list[str] = attrs.Factory(list)
    pruned: list[str] = attrs.Factory(list)
    reserved: bool = False
    """The reservation of run ids went with a write that was committed."""


def save(
    store: Database,
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
            pruned=_save_batch(store, instance_id, rows, history_limit, projections, extras),
            reserved=extras.reservation is not None,
        )
    except Exception as exc:  # noqa: BLE001 - retried run by run below
        logger.warning(
            "a write of %s failed (%s); writing them one by one", plural(len(rows), "run"), exc
        )
    saved = Saved()
    for row in rows:
        mine = [p for p in projections if p[0] == row.run_id]
        own = Extras(
            workflows=[w for w in extras.workflows if w[0] == row.run_id],
            texts=[t for t in extras.texts if t[0] == row.run_id],
            reservation=extras.reservation,
        )
        try:
            try:
                saved.pruned += _save_batch(store, instance_id, [row], history_limit, mine, own)
            except UnicodeEncodeError:
                # A lone surrogate slipped past every check (they are mended where
                # text enters): store U+FFFD rather than lose the run.
                logger.warning(
                    "run %s held text that is not UTF-8: stored mended",
                    row.run_id,
                    extra={"runId": row.run_id},
                )
                saved.pruned += _save_batch(
                    store, instance_id, [_mended(row)], history_limit, *_mended_extras(mine, own)
                )
            saved.reserved |= own.reservation is not None
        except Exception as exc:  # noqa: BLE001 - reported per run
            logger.error(
                "run %s could not be written to the run history: %s",
                row.run_id,
                exc,
                extra={"runId": row.run_id},
            )
            saved.failed.append(row.run_id)
    return saved


def _save_batch(
    store: Database,
    instance_id: str,
    rows: Sequence[RunRow],
    history_limit: int,
    projections: Sequence[tuple[str, int, str, str]],
    extras: Extras,
) -> list[str]:
    """Write `rows` in one transaction and prune their sessions; the ids pruned."""
    with store.immediate() as db:
        for row in rows:
            write_run(db, instance_id, row)
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
        if extras.reservation is not None:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", extras.reservation)
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
            reservation=extras.reservation,
        ),
    )


def write_run(db: sqlite3.Connection, instance_id: str, row: RunRow) -> None:
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
                create_time(child),
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
    if keep < 1:
        found = db.execute(BEYOND, (session_id, keep, *LIVE))
    else:
        boundary = [at for (at,) in db.execute(BOUNDARY, (session_id, keep - 1))]
        if len(boundary) < 2:
            return []  # `keep` runs at most: mostly there is nothing to delete
        if boundary[0] != boundary[1]:
            found = db.execute(OLDER, (session_id, boundary[0], *LIVE))
        else:
            found = db.execute(BEYOND, (session_id, keep, *LIVE))
    deleted = [run_id for (run_id,) in found]
    db.executemany("DELETE FROM runs WHERE run_id = ?", [(run_id,) for run_id in deleted])
    return deleted
