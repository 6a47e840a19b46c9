"""`run/close`: end an interactive child's conversation, or every one of the run's
(protocol.md §23.3): its input closes, it exits as a CLI does at the end of its
input, and it ends `completed`. The reply is the run's snapshot once they ended;
closing what already ended is a no-op (`alreadyTerminal` for an ended run)."""

from __future__ import annotations

from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.live_runs import child_index, held_run
from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.rpc.wire import CloseParams, RunSnapshot
from subagent_host.runs import live_requests


async def handle(params: CloseParams, ctx: HandlerContext) -> RunSnapshot:
    run = await held_run(params.run_id, ctx)
    index = child_index(run, params.index) if params.index is not None else None
    control = ctx.orchestrator.control_of(run.run_id)
    already = await live_requests.close(run, control, index)
    await ctx.store.written(run)  # a close the store did not take is no success
    return run_snapshot(run, already_terminal=already or None)
