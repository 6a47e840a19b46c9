"""`stop`: end a run's process trees — SIGTERM, a grace, then SIGKILL (protocol.md §10)."""

from __future__ import annotations

from typing import Final

from subagent_host.errors import RunNotFound
from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.rpc.errors import InvalidParams
from subagent_host.rpc.param_problems import ParamProblem
from subagent_host.rpc.wire import RunSnapshot, StopParams
from subagent_host.runs.state import Run
from subagent_host.values import MAX_DURATION_MS
from subagent_host.values.error_data import RunRef

DEFAULT_REASON: Final = "stopped by the client"


async def handle(params: StopParams, ctx: HandlerContext) -> RunSnapshot:
    """Answer the terminal snapshot; a run that had already ended comes back unchanged."""
    check_grace(params)
    run = await ctx.store.find(ctx.session_id, params.run_id)
    if run.is_terminal or ctx.orchestrator.get(run.run_id) is not None:
        return await stop_here(run, params, ctx)
    if ctx.stop_elsewhere is None:
        raise RunNotFound(
            f"run {run.run_id} is running in another server process on this state directory; "
            "stop it through that server",
            data=RunRef(run.run_id, reason="owned-by-another-server"),
        )
    # Its owner stops it (and tells its own client); it answers once the run is on disk.
    already = await ctx.stop_elsewhere(run.run_id, params)
    return run_snapshot(await ctx.store.find(ctx.session_id, run.run_id), already_terminal=already)


def check_grace(params: StopParams) -> None:
    if params.grace_ms is not None and not 0 <= params.grace_ms <= MAX_DURATION_MS:
        raise InvalidParams([ParamProblem("graceMs", f"must be 0..{MAX_DURATION_MS}")])


async def stop_here(run: Run, params: StopParams, ctx: HandlerContext) -> RunSnapshot:
    """Stop a run this server holds (stdio `stop` and the control socket's): the one path."""
    already = await ctx.orchestrator.stop(
        run, grace_ms=params.grace_ms, reason=params.reason or DEFAULT_REASON
    )
    await ctx.store.written(run)  # a stop the store did not take is no success
    return run_snapshot(run, already_terminal=already)
