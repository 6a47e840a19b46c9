"""`status`: one run's snapshot (with missed events after `since`), or this session's runs."""

from __future__ import annotations

from subagent_host.errors import RunNotFound
from subagent_host.handlers.context import Context
from subagent_host.handlers.snapshots import event_wire, run_snapshot, run_summary
from subagent_host.rpc.errors import InvalidParams, ParamProblem
from subagent_host.rpc.wire import RunList, RunSnapshot, StatusParams
from subagent_host.runs.state import Run


def handle(params: StatusParams, ctx: Context) -> RunSnapshot | RunList:
    """Synchronous: everything it reads is in memory."""
    if params.run_id is None:
        if params.since is not None:
            raise InvalidParams([ParamProblem("since", "since needs a runId")])
        return RunList(runs=tuple(run_summary(run) for run in ctx.runs.runs_of(ctx.session_id)))
    run = find_run(ctx, params.run_id)
    if params.since is None:
        return run_snapshot(run)
    events = tuple(event_wire(run, e) for e in run.events if e.seq > params.since)
    return run_snapshot(run, events=events)


def find_run(ctx: Context, run_id: str) -> Run:
    """This session's run with that id; another session's run is as unknown as none (-32001)."""
    run = ctx.runs.get(run_id)
    if run is None or run.session_id != ctx.session_id:
        raise RunNotFound(f"no run {run_id!r} in this session", data={"runId": run_id})
    return run
