"""`run/interrupt`: end an interactive child's current turn, not the child (protocol.md
§23.3). A child waiting for input is left as it is, and the reply says so."""

from __future__ import annotations

from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.live_runs import child_index, held_run
from subagent_host.rpc.wire import InterruptParams, InterruptResult
from subagent_host.runs.live_requests import live_child
from subagent_host.values.choices import TurnState
from subagent_host.values.interaction import TurnInfo


async def handle(params: InterruptParams, ctx: HandlerContext) -> InterruptResult:
    run = await held_run(params.run_id, ctx)
    index = child_index(run, params.index)
    live = live_child(run, ctx.orchestrator.control_of(run.run_id), index)
    turn = run.children[index].turn or TurnInfo(count=0, state=TurnState.WAITING)
    return InterruptResult(interrupted=live.interrupt(), turn=turn)
