"""`run/permit`: answer a tool use an interactive child waits on (protocol.md §23.4),
from any client of the run's session; the answer and who gave it are kept with the
run as a `permission` event."""

from __future__ import annotations

from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.live_runs import answerer, held_run
from subagent_host.rpc.errors import InvalidParams
from subagent_host.rpc.param_problems import ParamProblem
from subagent_host.rpc.wire import PermitParams, PermitResult
from subagent_host.runs import live_requests


async def handle(params: PermitParams, ctx: HandlerContext) -> PermitResult:
    run = await held_run(params.run_id, ctx)
    control = ctx.orchestrator.control_of(run.run_id)
    try:
        kind = live_requests.permit(
            run, control, params.permission_id, params.option_id, answerer(ctx)
        )
    except ValueError as exc:
        raise InvalidParams([ParamProblem("optionId", str(exc))]) from None
    return PermitResult(permission_id=params.permission_id, option_id=params.option_id, kind=kind)
