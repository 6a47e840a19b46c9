"""Reading runs back: a session's list, one run, its events, its launch projection.

Every function here runs on the store's thread.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import TYPE_CHECKING, Final

from subagent_host.runs.state import Run, RunEvent, RunStatus
from subagent_host.store.records import child_from_record, run_from_record, usage_from_record
from subagent_host.store.rows import event_from_record
from subagent_host.values import STEP_COMMAND, RunKind
from subagent_host.values.facts import RunSummary, Usage

if TYPE_CHECKING:  # the store's connection; the read-only browser (browse.py) needs none
    from subagent_host.planning.plan import RunPlan
    from subagent_host.store.database import Database

# A run is found by a prefix of its id only from this many characters on: shorter ones
# would match by chance.
MIN_PREFIX: Final = 8
_LISTED: Final = (
    "SELECT run_id, kind, status, created_at, ended_at, label FROM runs"
    " WHERE session_id = ? ORDER BY created_at DESC, run_id DESC LIMIT ?"
)


def list_runs(store: Database, session_id: str, limit: int) -> list[RunSummary]:
    """This session's runs, newest first (as last written: see `RunStore.summaries`),
    each with the usage of every attempt of its children summed."""
    db = store.db
    rows = db.execute(_LISTED, (session_id, limit)).fetchall()
    usages: dict[str, list[Usage | None]] = {}
    # Only the usage member of each attempt's record: its output may be 48 KiB.
    for run_id, usage in db.execute(
        f"WITH listed AS ({_LISTED}) SELECT run_id, json_extract(record, '$.usage')"
        " FROM attempts JOIN listed USING (run_id) WHERE json_extract(record, '$.usage')"
        " IS NOT NULL",
        (session_id, limit),
    ):
        usages.setdefault(run_id, []).append(usage_from_record(usage))
    return [
        RunSummary(
            run_id=run_id,
            kind=RunKind(kind),
            status=RunStatus(status),
            created_at=datetime.fromisoformat(created_at),
            ended_at=datetime.fromisoformat(ended_at) if ended_at else None,
            label=label,
            usage=Usage.total(usages.get(run_id, ())),
        )
        for run_id, kind, status, created_at, ended_at, label in rows
    ]


def load_run(store: Database, run_id: str) -> Run | None:
    """A run as it was last written, with its children's newest attempts (no events)."""
    db = store.db
    found = db.execute("SELECT record FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if found is None:
        return None
    return assemble(db, run_id, found[0])


def assemble(db: sqlite3.Connection, run_id: str, record: str) -> Run:
    children = [
        child_from_record(json.loads(child))
        for (child,) in db.execute(
            "SELECT record FROM attempts AS a WHERE run_id = ? AND attempt ="
            " (SELECT max(attempt) FROM attempts WHERE run_id = a.run_id AND idx = a.idx)"
            " ORDER BY idx",
            (run_id,),
        )
    ]
    run = run_from_record(json.loads(record), children)
    _fill_enforced_timeouts(db, run)
    if any(child.attempt > 1 for child in children):
        run.earlier_usage = _earlier_usage(db, run_id)
    if run.workflow is not None:
        _mark_command_steps(db, run)
    return run


# A timed-out child's reason, and the limit of its launch projection it names.
_TIMEOUT_LIMITS: Final = {"timeout": "timeoutMs", "stall": "stallTimeoutMs"}


def _fill_enforced_timeouts(db: sqlite3.Connection, run: Run) -> None:
    """A timed-out child recorded before the timeout it enforced was kept with it: the
    run's, for the child a timed-out run settled from (its first timed-out one), else
    the launch limit its reason names. The run settles from it again after a resume
    of another child (runs/settling.py), and then needs it."""
    lacking = [
        child
        for child in run.children
        if child.status is RunStatus.TIMED_OUT and child.enforced_timeout_ms is None
    ]
    if not lacking:
        return
    first = next(c for c in run.children if c.status is RunStatus.TIMED_OUT)
    if first.enforced_timeout_ms is None and run.status is RunStatus.TIMED_OUT:
        first.enforced_timeout_ms = run.enforced_timeout_ms
    for child in lacking:
        found = db.execute(
            "SELECT projection FROM children WHERE run_id = ? AND idx = ?",
            (run.run_id, child.index),
        ).fetchone()
        if child.enforced_timeout_ms is None and found is not None and found[0] is not None:
            limits = json.loads(found[0]).get("limits", {})
            child.enforced_timeout_ms = limits.get(_TIMEOUT_LIMITS.get(child.reason or ""))


def _earlier_usage(db: sqlite3.Connection, run_id: str) -> Usage | None:
    """The usage of the run's children's attempts before their newest, summed."""
    return Usage.total(
        usage_from_record(usage)
        for (usage,) in db.execute(
            "SELECT json_extract(record, '$.usage') FROM attempts AS a WHERE run_id = ?"
            " AND attempt < (SELECT max(attempt) FROM attempts WHERE run_id = a.run_id"
            " AND idx = a.idx) AND json_extract(record, '$.usage') IS NOT NULL",
            (run_id,),
        )
    )


def _mark_command_steps(db: sqlite3.Connection, run: Run) -> None:
    """The kind `command` of a workflow's steps that run a command (never stored: records
    of every version say `prompt`), from its stored definition."""
    assert run.workflow is not None
    found = db.execute(
        "SELECT definition FROM workflows WHERE run_id = ?", (run.run_id,)
    ).fetchone()
    if found is None:
        return
    # Planning is loaded for a workflow's run only: `runs` and `show` of other runs
    # start faster without it.
    from subagent_host.planning.stored_workflow import workflow_from_record

    try:
        plan = workflow_from_record(json.loads(found[0]))
    except (ValueError, KeyError, TypeError, AttributeError):  # unreadable: as planned
        return
    mark_command_steps(run, plan)


def mark_command_steps(run: Run, plan: RunPlan) -> None:
    """Give the kind `command` back to the steps of `run` that `plan` (its workflow's
    definition) says run a command: their records say `prompt`."""
    from subagent_host.planning.plan import command_steps

    assert run.workflow is not None
    commands = command_steps(plan)
    for step in run.workflow.steps:
        if step.index in commands:
            step.kind = STEP_COMMAND


def events_after(store: Database, run_id: str, seq: int) -> list[RunEvent]:
    rows = store.db.execute(
        "SELECT seq, record FROM events WHERE run_id = ? AND seq > ? ORDER BY seq",
        (run_id, seq),
    ).fetchall()
    return [event_from_record(s, json.loads(record)) for s, record in rows]


def run_ids_with_prefix(store: Database, session_id: str, prefix: str, limit: int = 2) -> list[str]:
    """Run ids of this session starting with `prefix` (at most `limit`)."""
    # substr, not LIKE: LIKE ignores case and treats % and _ as wildcards.
    rows = store.db.execute(
        "SELECT run_id FROM runs WHERE session_id = ? AND substr(run_id, 1, ?) = ? LIMIT ?",
        (session_id, len(prefix), prefix, limit),
    ).fetchall()
    return [run_id for (run_id,) in rows]


def load_workflow(store: Database, run_id: str) -> tuple[str | None, dict[int, str]]:
    """A workflow's stored definition (None if there is none) and its children's texts."""
    db = store.db
    found = db.execute("SELECT definition FROM workflows WHERE run_id = ?", (run_id,)).fetchone()
    texts = dict(
        db.execute("SELECT idx, text FROM workflow_texts WHERE run_id = ?", (run_id,)).fetchall()
    )
    return (found[0] if found else None), texts


def load_projection(store: Database, run_id: str, index: int) -> tuple[str | None, str | None]:
    """A child's stored launch projection and its digest (None, None if there is none)."""
    found = store.db.execute(
        "SELECT projection, projection_digest FROM children WHERE run_id = ? AND idx = ?",
        (run_id, index),
    ).fetchone()
    return (found[0], found[1]) if found else (None, None)
