"""`status`: one run's snapshot (with missed events after `since`), or this session's runs."""

from __future__ import annotations

import attrs

from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.snapshots import event_wire, run_snapshot
from subagent_host.rpc.errors import InvalidParams
from subagent_host.rpc.param_problems import ParamProblem
from subagent_host.rpc.wire import RunList, RunSnapshot, StatusParams


async def handle(params: StatusParams, ctx: HandlerContext) -> RunSnapshot | RunList:
    """Runs of earlier server processes on this state directory are included."""
    if params.run_id is None:
        if params.since is not None:
            raise InvalidParams([ParamProblem("since", "since needs a runId")])
        summaries = await ctx.store.summaries(ctx.session_id)
        return RunList(runs=tuple(summaries))
    run = await ctx.store.find(ctx.session_id, params.run_id)
    if params.since is None:
        return run_snapshot(run)
    events = await ctx.store.events_after(run, params.since)
    # The oldest seq held, when events the client asked for were dropped (a gap).
    first = events[0].seq if events else run.last_seq + 1
    return attrs.evolve(
        run_snapshot(run, events=tuple(event_wire(run, event) for event in events)),
        first_retained_seq=first if first > max(params.since, 0) + 1 else None,
    )
