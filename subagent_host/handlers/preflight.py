"""`preflight`: check a launch (or a resume) without starting anything (protocol.md §14, §15).

A launch is checked exactly as `spawn` would check it, then probed (is the
program there to execute?), and described: the normalized plan and its
fingerprint, and receipts saying what the children may do and which limits the
server enforces itself. An accepted launch gets a `preflightId`: a `spawn`
carrying it must run exactly that plan. A rejected one is a result with
`accepted: false`, not an error.
"""

from __future__ import annotations

from datetime import timedelta

import attrs

from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.resume_preflight import preflight_resume
from subagent_host.planning.preview import probe, versioned_receipts
from subagent_host.rpc.wire import PreflightParams, PreflightResult
from subagent_host.runs.approvals import PERSISTENCE_UNAVAILABLE
from subagent_host.values.facts import Diagnostic

LAUNCH_FIELDS = ("prompt", "agent", "command", "tasks", "chain", "workflow")


async def handle(params: PreflightParams, ctx: HandlerContext) -> PreflightResult:
    if params.resume is not None:
        if any(getattr(params, name) is not None for name in LAUNCH_FIELDS):
            return PreflightResult(
                accepted=False,
                diagnostics=(
                    Diagnostic(
                        "error", "invalid-shape", "give either a launch or `resume`, not both"
                    ),
                ),
            )
        return await preflight_resume(params.resume, ctx)
    checked = await ctx.check_launch(params)
    plan = checked.plan
    if plan is None:
        return PreflightResult(accepted=False, diagnostics=checked.diagnostics)
    diagnostics = [*checked.diagnostics, *probe(plan, ctx.toolchain.adapters)]
    accepted = not any(d.severity == "error" for d in diagnostics)
    result = PreflightResult(
        accepted=accepted,
        diagnostics=tuple(diagnostics),
        fingerprint=plan.fingerprint,
        plan=plan.normalized,
        receipts=await versioned_receipts(plan, ctx.toolchain, ctx.limits),
    )
    if not accepted:
        return result
    await ctx.require_executor()
    sealed = plan.fingerprint
    if (unavailable := ctx.store.needs_durable("preflight ids")) is not None:
        # The plan stands; only the id a spawn would carry is not issued.
        withheld = Diagnostic("warning", PERSISTENCE_UNAVAILABLE, f"no preflightId: {unavailable}")
        return attrs.evolve(result, diagnostics=(*result.diagnostics, withheld))
    ttl = timedelta(milliseconds=ctx.config.resume_token_ttl_ms)
    preflight_id, expires = await ctx.store.save_preflight(ctx.session_id, sealed, ttl)
    return attrs.evolve(result, preflight_id=preflight_id, expires_at=expires)
