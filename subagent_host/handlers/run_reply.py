"""The answer of a request that started a run (`spawn`, `resume`), in either mode.

`background` answers at once, once the run is on disk (a reply that names a run
is sent only after the run is committed); `task` answers when the run is
terminal (a mixed `tasks` run: when the members it waits for have ended, its
background members going on), or earlier with the run still going when the
client sends `run/detach` for it (handlers/detach.py). A cancelled `task`-mode request
stops its run and answers -32800 with the final snapshot (protocol.md §3.5). A
run whose write failed is answered -32603 instead, once its children are
ended and the run forgotten: nothing is left running that no store knows of.
"""

from __future__ import annotations

import asyncio
import logging

from subagent_host.errors import RecordFailed, RequestCancelled
from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.rpc.wire import RunSnapshot
from subagent_host.runs.state import Run

logger = logging.getLogger(__name__)


async def reply_with_run(ctx: HandlerContext, run: Run, mode: str) -> RunSnapshot:
    if mode == "task":
        try:
            await ctx.orchestrator.wait_for_reply(run)
        except asyncio.CancelledError:
            await asyncio.shield(
                ctx.orchestrator.stop(run, grace_ms=None, reason="request cancelled")
            )
            raise RequestCancelled(
                "request cancelled; its run was stopped", data=run_snapshot(run)
            ) from None
    try:
        # The events that settled the run leave in one write with this answer.
        with ctx.hold_output():
            await ctx.store.written(run)
    except RecordFailed:
        logger.error(
            "run %s could not be recorded: ending its children",
            run.run_id,
            extra={"runId": run.run_id},
        )
        await asyncio.shield(_abandon(ctx, run))
        raise
    return run_snapshot(run)


async def _abandon(ctx: HandlerContext, run: Run) -> None:
    with ctx.store.unrecorded(run):
        await ctx.orchestrator.abandon(run, reason="the run could not be recorded")
