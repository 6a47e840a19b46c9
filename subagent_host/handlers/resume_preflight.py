"""`preflight {resume}`: approve one resume, sealed in a single-use token (protocol.md §15).

The result shows the contract the resume would run (rebuilt from the stored
launch projection), its digest and the follow-up's digest, and a token bound to
this session, the run, the child, both digests and an expiry. Nothing starts.
"""

from __future__ import annotations

from datetime import timedelta

from subagent_host.handlers.context import HandlerContext
from subagent_host.planning.fingerprint import digest
from subagent_host.planning.plan import EMPTY_PROMPT, is_empty_prompt
from subagent_host.resuming.definition_check import definition_check
from subagent_host.resuming.target import ResumeRefused, resolve_target, resumed_child
from subagent_host.rpc.wire import PreflightResult, ResumeRequest
from subagent_host.runs.approvals import ResumeGrant
from subagent_host.runs.state import utc_now
from subagent_host.values.facts import Diagnostic


async def preflight_resume(request: ResumeRequest, ctx: HandlerContext) -> PreflightResult:
    overrides = request.overrides or {}
    try:
        target = await resolve_target(
            ctx.store,
            ctx.orchestrator,
            ctx.session_id,
            request.run_id,
            request.index,
            overrides,
            check_agent=definition_check(await ctx.agent_catalog(), ctx.config.settings.agents),
            check_backend=ctx.toolchain.resume_refusal,
            enabled=ctx.resume_enabled,
            egress_consent_required=ctx.config.require_egress_consent,
        )
    except ResumeRefused as refused:
        data = None if refused.change is None else refused.change.data()
        diagnostic = Diagnostic("error", refused.code, refused.message, refused.path, data=data)
        return PreflightResult(accepted=False, diagnostics=(diagnostic,))
    resumed = resumed_child(target, request.message, None, ctx.toolchain.adapters)
    if is_empty_prompt(resumed.backend, resumed.prompt):  # as a spawn's prompt would be
        diagnostic = Diagnostic(
            "error",
            EMPTY_PROMPT,
            f"the {resumed.backend} backend needs a follow-up with text in it, not an empty "
            "or whitespace-only one",
            "resume.message",
        )
        return PreflightResult(accepted=False, diagnostics=(diagnostic,))
    await ctx.require_executor()  # no token for a child that could not run
    now = utc_now()
    expires = now + timedelta(milliseconds=ctx.config.resume_token_ttl_ms)
    grant = ResumeGrant(
        session_id=ctx.session_id,
        run_id=target.run.run_id,
        index=target.index,
        contract_digest=target.contract_digest,
        follow_up_digest=digest(request.message),
        message=request.message,
        overrides=dict(overrides),
        expires_at=expires,
        consumed=False,
    )
    token = await ctx.store.save_token(grant)
    return PreflightResult(
        accepted=True,
        diagnostics=(),
        contract=target.contract,
        contract_digest=target.contract_digest,
        follow_up_digest=grant.follow_up_digest,
        token=token,
        expires_at=expires,
    )
