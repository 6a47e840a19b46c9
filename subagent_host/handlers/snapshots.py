"""Runs as the wire shows them: snapshots and `run/event` params (protocol.md §12, §11).

Only what the wire shows differently from the domain is built here: statuses as
strings, a signal's name, durations, the workflow's steps. What a run reports
(output, error, usage, resources, diagnostics) is passed as is (`values/facts.py`),
and moments are `datetime`s the wire's converter writes (`rpc/wire.timestamp`).
"""

from __future__ import annotations

import signal

from subagent_host.rpc.wire import (
    BackgroundMember,
    ChildSnapshot,
    EventWire,
    RunOutcome,
    RunSnapshot,
    StepSnapshot,
    WorkflowSnapshot,
)
from subagent_host.runs.state import ChildRun, Run, RunEvent, WorkflowState
from subagent_host.values.copying import shared
from subagent_host.values.durations import duration_ms


def outcome(run: Run | ChildRun) -> RunOutcome:
    """How a run or a child went so far, as both snapshots show it."""
    return shared(RunOutcome, run, duration_ms=duration_ms(run.started_at, run.ended_at))


def run_snapshot(
    run: Run,
    *,
    already_terminal: bool | None = None,
    events: tuple[EventWire, ...] | None = None,
) -> RunSnapshot:
    """The run as the wire shows it; a `stop` says whether it had already ended, a `status
    {since}` adds the events since then."""
    return RunSnapshot(
        run_id=run.run_id,
        session_id=run.session_id,
        kind=run.kind,
        status=run.status,
        created_at=run.created_at,
        fingerprint=run.fingerprint,
        last_seq=run.last_seq,
        children=tuple(child_snapshot(child) for child in run.children),
        admitted_by=run.admitted_by,
        egress_consent=run.egress_consent or None,
        label=run.label,
        outcome=outcome(run),
        enforced_timeout_ms=run.enforced_timeout_ms,
        reached_limit=run.reached_limit,
        usage=run.usage,
        workflow=_workflow(run.workflow),
        diagnostics=run.diagnostics or None,
        background=_background(run),
        pending_permissions=tuple(run.pending_permissions.values()) or None,
        already_terminal=already_terminal,
        events=events,
    )


def _background(run: Run) -> tuple[BackgroundMember, ...] | None:
    """A mixed run's background members as they are now (absent for any other run)."""
    if not run.background:
        return None
    members = (run.children[index] for index in run.background)
    return tuple(BackgroundMember(index=child.index, status=str(child.status)) for child in members)


def _workflow(state: WorkflowState | None) -> WorkflowSnapshot | None:
    if state is None:
        return None
    return WorkflowSnapshot(
        name=state.name,
        # A step's snapshot is its state, frozen (the same fields: rpc/wire/snapshots.py).
        steps=tuple(shared(StepSnapshot, step) for step in state.steps),
    )


def child_snapshot(child: ChildRun) -> ChildSnapshot:
    return shared(
        ChildSnapshot,
        child,
        signal=signal.Signals(child.signal).name if child.signal else None,
        outcome=outcome(child),
    )


def event_wire(run: Run, event: RunEvent) -> EventWire:
    return EventWire(run_id=run.run_id, seq=event.seq, at=event.at, event=event.payload)
