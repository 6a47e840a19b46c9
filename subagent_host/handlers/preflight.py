"""`preflight`: check a launch (or a resume) without starting anything (CONTRACT §2).

A launch is checked exactly as `spawn` would check it, then probed (is the
program there to execute?), and described: the normalized plan and its
fingerprint, and receipts saying what the children may do and which limits the
server enforces itself. An accepted launch gets a `preflightId`: a `spawn`
carrying it must run exactly that plan. A rejected one is a result with
`accepted: false`, not an error.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs

from subagent_host.backends.probe import find_executable
from subagent_host.handlers.context import Context
from subagent_host.handlers.resume_preflight import preflight_resume
from subagent_host.rpc.wire import PreflightParams, PreflightResult
from subagent_host.runs import approvals
from subagent_host.runs.fingerprint import fingerprint
from subagent_host.runs.plans import Access, RunPlan, normalized_plan, receipts
from subagent_host.runs.state import utc_now
from subagent_host.values.facts import Diagnostic

LAUNCH_FIELDS = ("prompt", "agent", "command", "tasks", "chain", "workflow")


async def handle(params: PreflightParams, ctx: Context) -> PreflightResult:
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
    diagnostics = list(checked.diagnostics)
    plan = checked.plan
    if plan is None:
        return PreflightResult(accepted=False, diagnostics=tuple(diagnostics))
    diagnostics += _probe(plan, ctx)
    normalized = normalized_plan(plan, ctx.adapters, plan.access)
    sealed = fingerprint(normalized)
    accepted = not any(d.severity == "error" for d in diagnostics)
    described = receipts(plan, ctx.adapters, plan.access or Access(), ctx.limits)
    await _add_versions(described, plan, ctx)
    result = PreflightResult(
        accepted=accepted,
        diagnostics=tuple(diagnostics),
        fingerprint=sealed,
        plan=normalized,
        receipts=described,
    )
    if not accepted:
        return result
    store = ctx.catalog.store
    if (unavailable := approvals.persistence_problem(store, "preflight ids")) is not None:
        # The plan stands; only the id a spawn would carry is not issued.
        withheld = Diagnostic(
            "warning", approvals.PERSISTENCE_UNAVAILABLE, f"no preflightId: {unavailable}"
        )
        return attrs.evolve(result, diagnostics=(*result.diagnostics, withheld))
    now = utc_now()
    expires = now + timedelta(milliseconds=ctx.config.resume_token_ttl_ms)
    preflight_id = approvals.new_secret("pf-")
    await store.call(
        approvals.save_preflight, store, preflight_id, ctx.session_id, sealed, now, expires
    )
    return attrs.evolve(result, preflight_id=preflight_id, expires_at=expires)


def _probe(plan: RunPlan, ctx: Context) -> list[Diagnostic]:
    """Each child's program must exist and be executable where the child would look."""
    found: list[Diagnostic] = []
    for index, child in enumerate(plan.children):
        launch = ctx.adapters[child.backend].prepare(child.item())
        program = launch.argv[0]
        if find_executable(program, child.cwd, child.env.get("PATH")) is None:
            where = "in its working directory" if "/" in program else "on the child's PATH"
            found.append(
                Diagnostic(
                    "error",
                    "executable-not-found",
                    f"{program!r} is not an executable file {where}",
                    f"children[{index}]" if len(plan.children) > 1 else "command",
                )
            )
    return found


async def _add_versions(described: dict[str, Any], plan: RunPlan, ctx: Context) -> None:
    """Each agent child's CLI version (probed once per program, then cached)."""
    for entry, child in zip(described["access"]["children"], plan.children, strict=True):
        program = ctx.adapters[child.backend].executable
        if program and ctx.probes is not None:
            entry["version"] = await ctx.probes.version(program)
