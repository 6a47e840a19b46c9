"""Runs as the wire shows them: snapshots, summaries and `run/event` params (CONTRACT §3, §4)."""

from __future__ import annotations

import functools
import signal
from datetime import datetime, timedelta
from typing import Any, Final

from subagent_host.rpc.wire import (
    ChildSnapshot,
    DiagnosticWire,
    ErrorWire,
    EventWire,
    OutputWire,
    ResourcesWire,
    RunSnapshot,
    RunSummary,
    StepSnapshot,
    UsageWire,
    WorkflowSnapshot,
)
from subagent_host.runs.state import (
    ChildRun,
    ErrorInfo,
    OutputInfo,
    Run,
    RunEvent,
    WorkflowState,
)
from subagent_host.store.face import Summary

MILLISECOND: Final = timedelta(milliseconds=1)


def timestamp(moment: datetime | None) -> str | None:
    """ISO 8601 UTC with milliseconds: `2026-11-30T02:40:00.123Z`."""
    if moment is None:
        return None
    return _iso_ms(moment)


# A run's few moments are formatted again for every snapshot of it.
@functools.lru_cache(maxsize=1024)
def _iso_ms(moment: datetime) -> str:
    # isoformat, not strftime: the C library's strftime re-reads the time zone each
    # call. Its first 23 characters are `YYYY-MM-DDTHH:MM:SS.mmm`; moments are UTC.
    return moment.isoformat(timespec="milliseconds")[:23] + "Z"


def duration_ms(start: datetime | None, end: datetime | None) -> int | None:
    """`endedAt - startedAt` exactly as the two timestamps read (whole milliseconds each).

    From the moments cut to the millisecond, as `timestamp` writes them: rounding the
    true difference instead could be 1 ms off what a client computes from the two.
    """
    if start is None or end is None:
        return None
    return (_to_ms(end) - _to_ms(start)) // MILLISECOND


def _to_ms(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def run_snapshot(run: Run, **extra: Any) -> RunSnapshot:
    return RunSnapshot(
        run_id=run.run_id,
        session_id=run.session_id,
        kind=str(run.kind),
        status=str(run.status),
        created_at=timestamp(run.created_at) or "",
        fingerprint=run.fingerprint,
        last_seq=run.last_seq,
        children=tuple(child_snapshot(child) for child in run.children),
        admitted_by=run.admitted_by,
        label=run.label,
        started_at=timestamp(run.started_at),
        ended_at=timestamp(run.ended_at),
        duration_ms=duration_ms(run.started_at, run.ended_at),
        output=_output(run.output),
        error=_error(run.error),
        reason=run.reason,
        enforced_timeout_ms=run.enforced_timeout_ms,
        reached_limit=run.reached_limit,
        workflow=_workflow(run.workflow),
        diagnostics=tuple(
            DiagnosticWire(severity=d.severity, code=d.code, message=d.message, path=d.path)
            for d in run.diagnostics
        )
        or None,
        **extra,
    )


def _workflow(state: WorkflowState | None) -> WorkflowSnapshot | None:
    if state is None:
        return None
    return WorkflowSnapshot(
        name=state.name,
        steps=tuple(
            StepSnapshot(
                index=step.index,
                kind=step.kind,
                status=step.status,
                children=tuple(step.children),
                label=step.label,
                as_=step.output_name,
            )
            for step in state.steps
        ),
    )


def child_snapshot(child: ChildRun) -> ChildSnapshot:
    return ChildSnapshot(
        index=child.index,
        backend=child.backend,
        status=str(child.status),
        attempt=child.attempt,
        label=child.label,
        pid=child.pid,
        exit_code=child.exit_code,
        signal=signal.Signals(child.signal).name if child.signal else None,
        stopped_by=str(child.stopped_by) if child.stopped_by else None,
        started_at=timestamp(child.started_at),
        ended_at=timestamp(child.ended_at),
        duration_ms=duration_ms(child.started_at, child.ended_at),
        output=_output(child.output),
        error=_error(child.error),
        reason=child.reason,
        usage=(
            UsageWire(
                input_tokens=child.usage.input_tokens,
                output_tokens=child.usage.output_tokens,
                cache_read_tokens=child.usage.cache_read_tokens,
                cache_write_tokens=child.usage.cache_write_tokens,
                cost_usd=child.usage.cost_usd,
            )
            if child.usage
            else None
        ),
        backend_session_id=child.backend_session_id,
        resources=(
            ResourcesWire(
                cpu_seconds=child.resources.cpu_seconds,
                peak_rss_bytes=child.resources.peak_rss_bytes,
                processes=child.resources.processes,
                leftovers_ended=child.resources.leftovers_ended,
            )
            if child.resources
            else None
        ),
        step=child.step,
    )


def summary_wire(summary: Summary) -> RunSummary:
    return RunSummary(
        run_id=summary.run_id,
        kind=summary.kind,
        status=summary.status,
        created_at=timestamp(summary.created_at) or "",
        label=summary.label,
        ended_at=timestamp(summary.ended_at),
    )


def event_wire(run: Run, event: RunEvent) -> EventWire:
    return EventWire(
        run_id=run.run_id,
        seq=event.seq,
        type=event.type,
        at=timestamp(event.at) or "",
        status=event.fields.get("status"),
        index=event.fields.get("index"),
        text=event.fields.get("text"),
    )


def _output(output: OutputInfo | None) -> OutputWire | None:
    if output is None:
        return None
    return OutputWire(
        text=output.text,
        truncated=output.truncated,
        bytes=output.bytes,
        lines=output.lines,
        partial=output.partial,
    )


def _error(error: ErrorInfo | None) -> ErrorWire | None:
    if error is None:
        return None
    return ErrorWire(
        code=error.code, message=error.message, data=dict(error.data) if error.data else None
    )
