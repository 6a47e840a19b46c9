"""`spawn`: start a run; in `task` mode, answer when it is terminal (CONTRACT §2)."""

from __future__ import annotations

import asyncio
import os

from subagent_host.errors import RequestCancelled
from subagent_host.handlers.context import Context
from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.handlers.spawn_plan import resolve_spawn
from subagent_host.rpc.wire import RunSnapshot, SpawnParams


async def handle(params: SpawnParams, ctx: Context) -> RunSnapshot:
    """Resolve and launch; `background` answers at once, `task` when the run has ended.

    A cancelled task-mode spawn stops its run and answers -32800 with the final snapshot.
    """
    resolved = resolve_spawn(
        params,
        available_backends=ctx.backends,
        depth=ctx.config.depth,
        max_depth=ctx.config.max_depth,
        server_cwd=os.getcwd(),
    )
    run = ctx.runs.launch(resolved.plan, ctx.session_id)
    if params.work_done_token is not None:
        ctx.progress.track(run.run_id, params.work_done_token)
    if resolved.mode == "background":
        await ctx.catalog.recorder.durable()  # the run id we answer with is on disk
        return run_snapshot(run)
    try:
        await ctx.runs.wait(run)
    except asyncio.CancelledError:
        await asyncio.shield(ctx.runs.stop(run, grace_ms=None, reason="request cancelled"))
        raise RequestCancelled(
            "request cancelled; its run was stopped", data=run_snapshot(run)
        ) from None
    await ctx.catalog.recorder.durable()
    return run_snapshot(run)
