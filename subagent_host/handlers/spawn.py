"""`spawn`: start a run; in `task` mode, answer when it is terminal (CONTRACT §2)."""

from __future__ import annotations

from subagent_host.errors import LaunchRejected
from subagent_host.handlers.context import Context
from subagent_host.handlers.run_reply import reply_with_run
from subagent_host.handlers.spawn_plan import ResolvedSpawn, accept
from subagent_host.rpc.wire import RunSnapshot, SpawnParams
from subagent_host.runs import approvals
from subagent_host.runs.plans import plan_fingerprint
from subagent_host.runs.state import utc_now


async def handle(params: SpawnParams, ctx: Context) -> RunSnapshot:
    """Resolve and launch; `background` answers at once, `task` when the run has ended.

    A cancelled task-mode spawn stops its run and answers -32800 with the final snapshot.
    """
    resolved = accept(await ctx.check_launch(params))
    if params.preflight_id is not None:
        await _take_preflight(ctx, params.preflight_id, resolved)
    run = ctx.runs.launch(resolved.plan, ctx.session_id, resolved.mode)
    if params.work_done_token is not None:
        ctx.progress.track(run, params.work_done_token)
    return await reply_with_run(ctx, run, resolved.mode)


async def _take_preflight(ctx: Context, preflight_id: str, resolved: ResolvedSpawn) -> None:
    """The launch must be the one that preflight approved: same plan, same session, in time."""
    fingerprint = plan_fingerprint(resolved.plan, ctx.adapters, resolved.plan.access)
    store = ctx.catalog.store
    problem = await store.call(
        approvals.take_preflight, store, preflight_id, ctx.session_id, fingerprint, utc_now()
    )
    if problem is None:
        return
    messages = {
        "unknown-preflight": "no preflight of this session has that id",
        "preflight-consumed": "that preflight was already used by a spawn",
        "preflight-expired": "that preflight has expired: run preflight again",
        "preflight-mismatch": "this spawn would run something else than the preflight approved",
    }
    diagnostic = {
        "severity": "error",
        "code": problem,
        "message": messages[problem],
        "path": "preflightId",
    }
    raise LaunchRejected(
        f"launch rejected: {messages[problem]}",
        data={"diagnostics": [diagnostic], "fingerprint": fingerprint},
    )
