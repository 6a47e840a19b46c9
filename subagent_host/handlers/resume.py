"""`resume {token}`: run the approved new attempt of a child, or nothing (protocol.md §15, §4).

Before any process starts: the token is looked up (by its hash), must belong to
this session, be unexpired and unused; the target is resolved again and its
contract rebuilt from what is stored; both digests must match what the token
was issued for; then the token is consumed by one conditional update. Every
failure is -32004 with `data.reason`, and nothing is spawned.
"""

from __future__ import annotations

from typing import NoReturn

import attrs

from subagent_host.errors import AmbiguousRunId, ResumeDenied, RunNotFound
from subagent_host.handlers.background_only import refuse_task_mode
from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.run_reply import reply_with_run
from subagent_host.planning.fingerprint import digest
from subagent_host.resuming.definition_check import definition_check
from subagent_host.resuming.target import ResumeRefused, resolve_target, resumed_child
from subagent_host.rpc.errors import InvalidParams
from subagent_host.rpc.param_problems import ParamProblem
from subagent_host.rpc.wire import ResumeParams, RunSnapshot
from subagent_host.runs.approvals import PERSISTENCE_UNAVAILABLE, Refusal
from subagent_host.runs.state import Run, restore_events
from subagent_host.values import BACKGROUND_MODE, MODES
from subagent_host.values.error_data import ResumeDenial


def deny(message: str, denial: ResumeDenial) -> NoReturn:
    raise ResumeDenied(f"resume denied: {message}", data=denial)


def refused_denial(refused: ResumeRefused) -> ResumeDenial:
    """A target that cannot be resumed, as -32004's data: `launch-changed` says what changed."""
    if (change := refused.change) is None:
        return ResumeDenial(refused.reason, code=refused.code)
    return ResumeDenial(
        refused.reason,
        code=refused.code,
        changed=change.changed,
        expected=change.expected,
        actual=change.actual,
    )


async def handle(params: ResumeParams, ctx: HandlerContext) -> RunSnapshot:
    if params.mode is not None and params.mode not in MODES:
        raise InvalidParams([ParamProblem("mode", f"must be one of {', '.join(sorted(MODES))}")])
    if (unavailable := ctx.store.needs_durable("resume tokens")) is not None:
        deny(unavailable, ResumeDenial("not-resumable", code=PERSISTENCE_UNAVAILABLE))
    grant = await ctx.store.check_token(params.token, ctx.session_id)
    if isinstance(grant, Refusal):
        deny(grant.message, ResumeDenial(grant.code))
    try:
        target = await resolve_target(
            ctx.store,
            ctx.orchestrator,
            grant.session_id,
            grant.run_id,
            grant.index,
            grant.overrides,
            check_agent=definition_check(await ctx.agent_catalog(), ctx.config.settings.agents),
            check_backend=ctx.toolchain.resume_refusal,
            enabled=ctx.resume_enabled,
            egress_consent_required=ctx.config.require_egress_consent,
        )
    except (RunNotFound, AmbiguousRunId):
        deny(
            "the run the token was issued for is gone",
            ResumeDenial("mismatch", run_id=grant.run_id),
        )
    except ResumeRefused as refused:
        deny(refused.message, refused_denial(refused))
    interactive = target.contract.projection.interactive is True
    refuse_task_mode(params.mode, ["mode"] if interactive else [])
    if target.contract_digest != grant.contract_digest:
        deny(
            "what the run would resume no longer matches what was approved",
            ResumeDenial("mismatch", expected=grant.contract_digest, actual=target.contract_digest),
        )
    if digest(grant.message) != grant.follow_up_digest:
        deny(
            "the follow-up message no longer matches what was approved",
            ResumeDenial("mismatch"),
        )
    await ctx.require_executor()
    ctx.orchestrator.check_capacity(
        1
    )  # before the token is spent: a full queue refuses with nothing recorded
    if (refusal := await ctx.store.redeem_token(params.token, ctx.session_id)) is not None:
        deny(refusal.message, ResumeDenial(refusal.code))
    retained = await ctx.store.events_after(target.run, target.run.first_retained_seq - 1)
    # From here on nothing awaits until the attempt has started: checked and started
    # as one step, on the one object this server keeps for the run (another request
    # may have read its own copy of it from the store meanwhile).
    run = ctx.orchestrator.keep(target.run)
    if not run.is_terminal:  # resumed by another token while this one was being checked
        deny(
            f"run {run.run_id} is running again",
            ResumeDenial("not-resumable", code="still-running"),
        )
    if run.children[target.index].attempt + 1 != target.contract.attempt:
        deny(
            f"child {target.index} of run {run.run_id} was resumed meanwhile",
            ResumeDenial("mismatch"),
        )
    if not run.events:  # released when it ended: counted again against the bounds
        restore_events(run, retained)
    target = attrs.evolve(target, run=run)
    env = ctx.orchestrator.env_of(run.run_id, target.index)
    child = resumed_child(target, grant.message, env, ctx.toolchain.adapters)
    mode = BACKGROUND_MODE if interactive else resume_mode(params.mode, run, target.index, ctx)
    with ctx.announcing(mode):  # a background reply comes before the attempt's events
        ctx.orchestrator.resume(run, target.index, child, workflow=target.workflow)
    return await reply_with_run(ctx, run, mode)


def resume_mode(asked: str | None, run: Run, index: int, ctx: HandlerContext) -> str:
    """The request's mode, else the mode the resumed member ran in (the one the run's spawn
    answered in, `background` for a background member of a mixed run), else `default_mode`."""
    return asked or run.member_mode(index) or ctx.config.settings.default_mode or BACKGROUND_MODE
