"""The answer of a request that started a run (`spawn`, `resume`), in either mode.

`background` answers at once, once the run is on disk (a reply that names a run
is sent only after the run is committed); `task` answers when the run is
terminal. A cancelled `task`-mode request stops its run and answers -32800 with
the final snapshot (CONTRACT §1).
"""

from __future__ import annotations

import asyncio

from subagent_host.errors import RequestCancelled
from subagent_host.handlers.context import Context
from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.rpc.wire import RunSnapshot
from subagent_host.runs.state import Run


async def reply_with_run(ctx: Context, run: Run, mode: str) -> RunSnapshot:
    if mode == "task":
        try:
            await ctx.runs.wait(run)
        except asyncio.CancelledError:
            await asyncio.shield(ctx.runs.stop(run, grace_ms=None, reason="request cancelled"))
            raise RequestCancelled(
                "request cancelled; its run was stopped", data=run_snapshot(run)
            ) from None
    await ctx.catalog.recorder.durable()
    return run_snapshot(run)
