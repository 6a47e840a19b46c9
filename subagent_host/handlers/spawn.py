"""`spawn`: start a run; in `task` mode, answer when it is terminal (protocol.md §8)."""

from __future__ import annotations

from typing import Final, NoReturn

import attrs

from subagent_host.errors import LaunchRejected
from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.run_reply import reply_with_run
from subagent_host.planning.check import ResolvedSpawn, resolve_or_reject
from subagent_host.rpc.wire import RunSnapshot, SpawnParams
from subagent_host.runs.approvals import PERSISTENCE_UNAVAILABLE
from subagent_host.values.choices import AdmittedBy
from subagent_host.values.error_data import Rejection
from subagent_host.values.facts import Diagnostic

# The admission policy (`--require-preflight`): only what a preflight approved runs.
PREFLIGHT_REQUIRED: Final = Diagnostic(
    "error",
    "preflight-required",
    "this server admits only a spawn approved by preflight: run preflight with the same "
    "params and pass its preflightId",
    "preflightId",
)


async def handle(params: SpawnParams, ctx: HandlerContext) -> RunSnapshot:
    """Resolve and launch; `background` answers at once, `task` when the run has ended
    (a mixed `tasks` run: when its `task` members have ended, protocol.md §8.5).

    A cancelled task-mode spawn stops its run and answers -32800 with the final snapshot.
    """
    checked = await ctx.check_launch(params)
    if params.preflight_id is None and ctx.config.require_preflight:
        checked = attrs.evolve(checked, diagnostics=(*checked.diagnostics, PREFLIGHT_REQUIRED))
    resolved = resolve_or_reject(checked)
    await ctx.require_executor()
    # Which files the agent CLIs are, for the projections a resume is checked against.
    programs = await ctx.orchestrator.identify(resolved.plan)
    # Before a preflight id is spent: a full queue refuses with nothing recorded.
    ctx.orchestrator.check_capacity(ctx.orchestrator.children_added(resolved.plan))
    admitted_by = AdmittedBy.DIRECT
    if params.preflight_id is not None:
        await _take_preflight(ctx, params.preflight_id, resolved)
        admitted_by = AdmittedBy.PREFLIGHT
    with ctx.announcing(resolved.mode):  # a background reply comes before the run's events
        run = ctx.orchestrator.launch(
            resolved.plan,
            ctx.session_id,
            admitted_by,
            resolved.mode,
            resolved.background,
            programs=programs,
        )
    if params.work_done_token is not None:
        ctx.progress.track(run, params.work_done_token)
    return await reply_with_run(ctx, run, resolved.mode)


async def _take_preflight(ctx: HandlerContext, preflight_id: str, resolved: ResolvedSpawn) -> None:
    """The launch must be the one that preflight approved: same plan, same session, in time."""
    fingerprint = resolved.plan.fingerprint
    if (unavailable := ctx.store.needs_durable("preflight ids")) is not None:
        _reject(PERSISTENCE_UNAVAILABLE, unavailable, fingerprint)
    refusal = await ctx.store.take_preflight(preflight_id, ctx.session_id, fingerprint)
    if refusal is not None:
        _reject(refusal.code, refusal.message, fingerprint)


def _reject(code: str, message: str, fingerprint: str) -> NoReturn:
    diagnostic = Diagnostic("error", code, message, "preflightId")
    raise LaunchRejected(
        f"launch rejected: {message}", data=Rejection((diagnostic,), fingerprint=fingerprint)
    )
