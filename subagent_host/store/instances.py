"""Server processes on a state directory, and what dead ones left: marked, then cleaned up.

A server registers itself (an id, its pid and start time); at start, the runs
of servers that are gone become `interrupted` once, and the processes they
may have left are queued (`cleanups`) until a server has ended them. Every
function here runs on the store's thread.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Final

import attrs

from subagent_host.backends.sessions import Seal
from subagent_host.runs.endings import ChildInterrupted, Interrupted
from subagent_host.runs.state import TERMINAL, ChildRun, Run, RunStateMachine, RunStatus
from subagent_host.store.database import Database
from subagent_host.store.reads import assemble
from subagent_host.store.records import child_from_record, child_record, dumps
from subagent_host.store.rows import run_row
from subagent_host.store.run_ids import meta_key
from subagent_host.store.writes import LIVE, write_run
from subagent_host.values.choices import StepStatus

# A session none of whose runs was created or ended within this long (and none of
# which is live) is deleted at a server's start: sessions are made per connection
# by default, and `--history-limit` bounds each one, not how many there are.
SESSION_RETENTION: Final = timedelta(days=30)


@attrs.frozen
class Leftover:
    """A process an interrupted run may have left: check it before touching it."""

    run_id: str
    pid: int
    create_time: float | None


def register_instance(
    store: Database,
    instance_id: str,
    pid: int,
    create_time: float,
    now: datetime,
    reserved: str | None = None,
) -> None:
    """Record this server, with the run ids it reserves (JSON; run_ids.py) if any."""
    with store.immediate() as db:
        db.execute(
            "INSERT INTO instances (instance_id, pid, create_time, started_at) VALUES (?, ?, ?, ?)",
            (instance_id, pid, create_time, now.isoformat()),
        )
        if reserved is not None:
            db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                (meta_key(instance_id), reserved),
            )


def end_instance(store: Database, instance_id: str, now: datetime) -> None:
    """This server has ended, every run of it written: its reserved ids are free."""
    with store.immediate() as db:
        db.execute(
            "UPDATE instances SET ended_at = ? WHERE instance_id = ?",
            (now.isoformat(), instance_id),
        )
        db.execute("DELETE FROM meta WHERE key = ?", (meta_key(instance_id),))


def live_instances(store: Database, is_alive: Callable[[int, float], bool]) -> set[str]:
    """Instances not marked ended whose process (pid and start time) still runs."""
    rows = store.db.execute(
        "SELECT instance_id, pid, create_time FROM instances WHERE ended_at IS NULL"
    ).fetchall()
    return {instance_id for instance_id, pid, create_time in rows if is_alive(pid, create_time)}


def live_owner(
    store: Database, run_id: str, is_alive: Callable[[int, float], bool]
) -> tuple[str, int] | None:
    """The instance that recorded the run and its pid, if it has not ended and runs."""
    found = store.db.execute(
        "SELECT i.instance_id, i.pid, i.create_time FROM runs AS r JOIN instances AS i"
        " ON i.instance_id = r.instance_id WHERE r.run_id = ? AND i.ended_at IS NULL",
        (run_id,),
    ).fetchone()
    if found is None or not is_alive(found[1], found[2]):
        return None
    return str(found[0]), int(found[1])


def recover(
    store: Database,
    instance_id: str,
    is_alive: Callable[[int, float], bool],
    state_machine: RunStateMachine,
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
            run = assemble(db, run_id, record)
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
            _interrupt(state_machine, run, reason, seal)
            write_run(db, owner, run_row(run, [e for e in run.events if e.seq >= first_new_seq]))
            interrupted.append(run_id)
        for other in gone:
            _clean_up_reserved(db, other)
            db.execute(
                "UPDATE instances SET ended_at = coalesce(ended_at, ?) WHERE instance_id = ?",
                (state_machine.now().isoformat(), other),
            )
    return interrupted, leftovers


def _clean_up_reserved(db: sqlite3.Connection, instance_id: str) -> None:
    """Queue the marker scan for the ids a gone server reserved that no stored run has.

    Such a run was still held off the disk when its server died (run_ids.py):
    its children may run on, marked with its id. There is no run to mark
    interrupted: no reply ever named it.
    """
    key = meta_key(instance_id)
    found = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    if found is None:
        return
    reserved = json.loads(found[0])
    if not reserved:
        db.execute("DELETE FROM meta WHERE key = ?", (key,))
        return
    stored = {
        run_id
        for (run_id,) in db.execute(
            f"SELECT run_id FROM runs WHERE run_id IN ({','.join('?' * len(reserved))})",
            reserved,
        )
    }
    db.executemany(
        "INSERT INTO cleanups (run_id, pid, create_time) VALUES (?, NULL, NULL)",
        [(run_id,) for run_id in reserved if run_id not in stored],
    )
    db.execute("DELETE FROM meta WHERE key = ?", (key,))


@attrs.frozen
class Pruned:
    """What `prune_stale` deleted."""

    sessions: int
    runs: int
    instances: int
    run_ids: tuple[str, ...] = attrs.field(default=(), eq=False)
    """The deleted runs' ids: what they left outside the database (git worktrees) goes too."""


def prune_stale(store: Database, instance_id: str, now: datetime) -> Pruned:
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
        run_ids: list[str] = []
        for session_id in stale:
            found = db.execute("SELECT run_id FROM runs WHERE session_id = ?", (session_id,))
            run_ids += [run_id for (run_id,) in found]
            db.execute("DELETE FROM runs WHERE session_id = ?", (session_id,))
        instances = db.execute(
            "DELETE FROM instances WHERE instance_id != ? AND ended_at IS NOT NULL"
            " AND instance_id NOT IN (SELECT instance_id FROM runs WHERE status IN (?, ?))",
            (instance_id, *LIVE),
        ).rowcount
    return Pruned(
        sessions=len(stale), runs=len(run_ids), instances=instances, run_ids=tuple(run_ids)
    )


def pending_cleanups(store: Database) -> tuple[list[str], list[Leftover]]:
    """Interrupted runs whose leftover processes no server has finished ending yet."""
    rows = store.db.execute("SELECT run_id, pid, create_time FROM cleanups").fetchall()
    run_ids = sorted({run_id for run_id, _, _ in rows})
    leftovers = [Leftover(run_id, pid, ct) for run_id, pid, ct in rows if pid is not None]
    return run_ids, leftovers


def cleanup_pending(store: Database, run_id: str) -> bool:
    """True while a server is still ending what this interrupted run left."""
    found = store.db.execute("SELECT 1 FROM cleanups WHERE run_id = ? LIMIT 1", (run_id,))
    return found.fetchone() is not None


def finish_cleanups(store: Database, run_ids: Sequence[str]) -> None:
    with store.immediate() as db:
        db.executemany("DELETE FROM cleanups WHERE run_id = ?", [(r,) for r in run_ids])


def seal_interrupted(
    store: Database, run_ids: Sequence[str], seal: Callable[[ChildRun], Seal | None]
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
                    (dumps(child_record(child)), run_id, index, attempt),
                )


def _interrupt(
    state_machine: RunStateMachine,
    run: Run,
    reason: str,
    seal: Callable[[ChildRun], Seal | None] | None,
) -> None:
    for child in run.children:
        if child.status not in TERMINAL:
            found = seal(child) if seal is not None else None
            if found is not None:
                child.session_digest, child.session_digest_source = found.digest, found.source
            state_machine.transition_child(run, child, ChildInterrupted(reason))
    for step in run.workflow.steps if run.workflow is not None else ():
        # The step a dead server was carrying out (the state machine refuses any other).
        state_machine.transition_step(run, step, StepStatus.INTERRUPTED)
    state_machine.transition(run, Interrupted(reason))
