"""Protected resume: the target of a resume, and what it would run, rebuilt from the store.

Both `preflight {resume}` and `resume` call `resolve_target`: the run (this
session's), the child (`index`, by default the first that did not complete),
its stored launch projection (checked against its digest), the overrides (only
lowering `timeoutMs`, `stallTimeoutMs`, `maxTurns`, `maxTokens`, `maxCostUsd`, narrowing
`access`), the agent CLI it would start (the approved file, version and argv:
`launch_check.py`), and the contract that results, whose digest a token is bound to.
Nothing here starts a process but the `--version` of the approved file (once per file
content; never of an ACP agent's, whose version is the one it answered the probe with).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from subagent_host.backends.base import Backend
from subagent_host.backends.sessions import UNSAFE, SessionProblem
from subagent_host.planning.egress import EGRESS_CONSENT_REQUIRED
from subagent_host.planning.fingerprint import fingerprint
from subagent_host.planning.plan import ChildPlan, RunPlan, prepare_child
from subagent_host.planning.projection import (
    GUIDANCE,
    ProjectionProblem,
    check_overrides,
    child_of,
    contract,
    unseal,
)
from subagent_host.planning.stored_workflow import (
    workflow_env_keys,
    workflow_from_record,
    workflow_record,
)
from subagent_host.planning.toolchain import RESUME_UNSUPPORTED
from subagent_host.planning.views import AgentRef, Contract, ContractWorkflow, Projection, to_json
from subagent_host.resuming.launch_check import (
    LAUNCH_CHANGED,
    LaunchChange,
    compare_launch,
    launch_check,
)
from subagent_host.runs.approvals import PERSISTENCE_UNAVAILABLE
from subagent_host.runs.child_runner import WORKSPACE_GONE
from subagent_host.runs.orchestrator import RunOrchestrator
from subagent_host.runs.state import TERMINAL, ChildRun, Run, RunStatus
from subagent_host.store.run_store import RunStore
from subagent_host.values import RunKind
from subagent_host.values.plurals import plural

ResumeCheck = Callable[[str], Awaitable[str | None]]
"""Given a backend's name: why its children cannot be resumed at all (an ACP agent that
does not declare `loadSession`), None when they can."""
AgentCheck = Callable[[AgentRef], tuple[str, str] | None]
"""Given a stored agent reference (name, source, path, digest): why the definition a
resume would use now is not that one, as (code, message); None when it is."""


class ResumeRefused(Exception):
    """The target cannot be resumed. `reason` is a protocol.md §4 reason; `code` says why;
    `change` is what a program needs beyond that (`launch-changed`: what changed)."""

    def __init__(
        self,
        reason: str,
        code: str,
        message: str,
        path: str | None = None,
        change: LaunchChange | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code
        self.message = message
        self.path = path
        self.change = change


@attrs.frozen
class Target:
    run: Run
    index: int
    projection: Projection
    contract: Contract
    contract_digest: str
    workflow: tuple[RunPlan, dict[int, str]] | None = None
    """A workflow's plan and its children's texts, read from the store (None when
    this server still has them, or the run is no workflow)."""
    session_file: str | None = None
    """The checked session file the new attempt continues, when its CLI takes a path."""


async def resolve_target(
    store: RunStore,
    orchestrator: RunOrchestrator,
    session_id: str,
    run_id: str,
    index: int | None,
    overrides: Mapping[str, Any],
    *,
    check_agent: AgentCheck | None = None,
    check_backend: ResumeCheck | None = None,
    enabled: bool = True,
    egress_consent_required: bool = False,
) -> Target:
    """Find and check what a resume would run; RunNotFound/AmbiguousRunId or ResumeRefused.

    `egress_consent_required` (`--require-egress-consent`): an agent child is resumed only
    when its run was launched with `egressConsent: true`, which a resume carries on.
    """
    if not enabled:
        raise ResumeRefused(
            "not-resumable",
            "resume-disabled",
            "resume is disabled on this server (enable_continue is false in its configuration)",
        )
    if (unavailable := store.needs_durable("resume tokens")) is not None:
        raise ResumeRefused("not-resumable", PERSISTENCE_UNAVAILABLE, unavailable)
    run = await store.find(session_id, run_id)
    chosen = _default_index(run) if index is None else index
    if not 0 <= chosen < len(run.children):
        raise ResumeRefused(
            "not-resumable",
            "invalid-index",
            f"run {run.run_id} has {_children(len(run.children))}, not {chosen}",
            "resume.index",
        )
    child = run.children[chosen]
    if not run.is_terminal or child.status not in TERMINAL:
        raise ResumeRefused(
            "not-resumable",
            "still-running",
            f"child {chosen} of run {run.run_id} is {child.status}: wait for it to end, or stop it",
        )
    if await store.cleanup_pending(run.run_id):
        # Its leftovers are found by the run's marker, which a new attempt carries too.
        raise ResumeRefused(
            "not-resumable",
            "still-running",
            f"the processes run {run.run_id} left when its server died are still being "
            "ended: try again in a moment",
        )
    stored, digest = await store.stored_projection(run.run_id, chosen)
    try:
        projection = unseal(stored, digest)
    except ProjectionProblem as problem:
        raise ResumeRefused("not-resumable", problem.code, problem.message) from None
    if egress_consent_required and projection.backend != "command" and not run.egress_consent:
        raise ResumeRefused(
            "not-resumable",
            EGRESS_CONSENT_REQUIRED,
            f"run {run.run_id} was launched without egressConsent, which this server requires "
            "of an agent child: launch anew with egressConsent: true",
        )
    if check_backend is not None and (why := await check_backend(projection.backend)):
        raise ResumeRefused("not-resumable", RESUME_UNSUPPORTED, f"{why}; {GUIDANCE}")
    backend = orchestrator.services.backends.get(projection.backend)
    refused = check_overrides(projection, overrides, backend.protocol if backend else None)
    if overrides.get("access") is not None and _configures_itself(orchestrator, projection):
        # Narrowing on resume removes tools; an ACP agent's cannot be removed, and what
        # holds instead depends on who answers its permissions (protocol.md §24.4).
        refused.append(
            f"access: the {projection.backend} ACP agent's tools are its own and cannot be "
            'narrowed on resume; launch anew with the access (and approvals "policy")'
        )
    if refused:
        raise ResumeRefused(
            "override-not-allowed", "override-not-allowed", "; ".join(refused), "resume.overrides"
        )
    if projection.env_keys and orchestrator.env_of(run.run_id, chosen) is None:
        raise ResumeRefused(
            "not-resumable",
            "environment-gone",
            "this child was launched with `env` values, which are never stored and this "
            f"server process no longer has; {GUIDANCE}",
        )
    if child.workspace is not None and not await asyncio.to_thread(
        os.path.isdir, child.workspace.path
    ):
        raise ResumeRefused(
            "not-resumable",
            WORKSPACE_GONE,
            f"the worktree {child.workspace.path!r} this child worked in is gone (it held no "
            f"changes, or was removed): {GUIDANCE}",
        )
    # An ACP agent keeps its sessions itself: nothing to check here (`session/load` is
    # refused `resume-unsupported` at run time by an agent that does not declare
    # `loadSession`; a probe of the agent's `initialize` may refuse it earlier).
    session_file = await _check_session(orchestrator, run, child, projection)
    await _check_launch(orchestrator, run, chosen, projection)
    agents = [projection.agent] if projection.agent is not None else []
    workflow: tuple[RunPlan, dict[int, str]] | None = None
    sealed_workflow: ContractWorkflow | None = None
    if run.kind is RunKind.WORKFLOW:
        step = child.step or 0
        _check_later_steps(run, step)
        record, plan, stored_texts = await _workflow(store, orchestrator, run, step)
        if stored_texts is not None:  # this server no longer has the runner: from the store
            workflow = (plan, stored_texts)
        later = _later_templates(plan, step)
        agents += [ref for i in later if (ref := plan.children[i].agent) is not None]
        sealed_workflow = ContractWorkflow(definition_digest=fingerprint(record), step=step)
    for agent in agents:
        _check_agent(check_agent, agent)
    sealed = contract(
        run.run_id,
        chosen,
        child.attempt + 1,
        projection,
        overrides,
        backend_session_id=child.backend_session_id,
        session_digest=child.session_digest,
        session_digest_source=child.session_digest_source,
        workflow=sealed_workflow,
        launch_check=launch_check(projection),
    )
    return Target(
        run=run,
        index=chosen,
        projection=projection,
        contract=sealed,
        contract_digest=fingerprint(to_json(sealed)),
        workflow=workflow,
        session_file=session_file,
    )


def _configures_itself(orchestrator: RunOrchestrator, projection: Projection) -> bool:
    """Whether the child's backend is an agent whose tools are its own (an ACP agent)."""
    backend = orchestrator.services.backends.get(projection.backend)
    return backend is not None and backend.configures_itself


async def _check_session(
    orchestrator: RunOrchestrator, run: Run, child: ChildRun, projection: Projection
) -> str | None:
    """Refuse unless the CLI session the attempt continues is still what it left.

    Returns the checked file when the CLI is given it by path (pi), else None.
    """
    sessions = orchestrator.sessions
    backend = projection.backend
    if child.backend_session_id is None or sessions is None or backend == "command":
        return None
    env = orchestrator.cli_environment(backend, run.run_id, child.index)
    try:
        path = await asyncio.to_thread(
            sessions.check,
            backend,
            child.backend_session_id,
            child.session_digest,
            env=env,
            # An isolated child's CLI ran (and keeps its session by) its worktree.
            cwd=child.workspace_cwd or projection.cwd,
        )
    except SessionProblem as problem:
        raise ResumeRefused("not-resumable", problem.code, problem.message) from None
    except OSError as exc:
        raise ResumeRefused(
            "not-resumable",
            UNSAFE,
            f"the session file of this child cannot be read ({exc.strerror or exc}); {GUIDANCE}",
        ) from None
    return str(path) if path is not None and backend == "pi" else None


async def _check_launch(
    orchestrator: RunOrchestrator, run: Run, index: int, projection: Projection
) -> None:
    """Refuse unless the agent CLI a new attempt would start is the one approved."""
    if projection.backend == "command":
        return
    services = orchestrator.services
    env = orchestrator.env_of(run.run_id, index) or {}
    change = await compare_launch(
        projection, services.backends[projection.backend], services.identities, env.get("PATH")
    )
    if change is not None:
        raise ResumeRefused(
            LAUNCH_CHANGED,
            LAUNCH_CHANGED,
            f"the {projection.backend} launch this child would resume is not the one "
            f"approved: {change.sentence()}; {GUIDANCE}",
            change=change,
        )


def _check_later_steps(run: Run, step: int) -> None:
    """Only a child of the step the workflow ended at (or of its last step) is resumed:
    a later step that ran on this child's output would be left behind, stale."""
    assert run.workflow is not None
    ran = [later.index for later in run.workflow.steps[step + 1 :] if later.children]
    if ran:
        raise ResumeRefused(
            "not-resumable",
            "later-steps-ran",
            f"step {ran[0]} of this workflow already ran on this child's output: resume a "
            f"child of the step the workflow ended at; {GUIDANCE}",
        )


def _check_agent(check_agent: AgentCheck | None, agent: AgentRef) -> None:
    """Fail closed unless the definition a resume would use now is the one launched."""
    problem = check_agent(agent) if check_agent is not None else None
    if problem is not None:
        code, message = problem
        raise ResumeRefused("not-resumable", code, f"{message}; {GUIDANCE}")


async def _workflow(
    store: RunStore, orchestrator: RunOrchestrator, run: Run, step: int
) -> tuple[dict[str, Any], RunPlan, dict[int, str] | None]:
    """The workflow's definition record and plan; its children's texts when they are read
    from the store (None: this server's runner has them)."""
    runner = orchestrator.workflow_of(run.run_id)
    if runner is not None:
        return workflow_record(runner.plan), runner.plan, None
    stored, texts = await store.stored_workflow(run.run_id)
    try:
        record = json.loads(stored) if stored is not None else None
        plan = workflow_from_record(record) if isinstance(record, dict) else None
    except ValueError:
        plan = None
    if plan is None or record is None:
        raise ResumeRefused(
            "not-resumable",
            "workflow-missing",
            f"the definition of workflow run {run.run_id} is missing or unreadable; {GUIDANCE}",
        )
    later = _later_templates(plan, step)
    keys = workflow_env_keys(record)
    if any(keys[i] for i in later):
        raise ResumeRefused(
            "not-resumable",
            "environment-gone",
            "a later step of this workflow was launched with `env` values, which are never "
            f"stored and this server process no longer has; {GUIDANCE}",
        )
    return record, plan, texts


def _later_templates(plan: RunPlan, step: int) -> list[int]:
    """The item templates of the steps after `step`: what a resume would go on to run."""
    assert plan.workflow is not None
    return [i for later in plan.workflow.steps[step + 1 :] for i in later.items]


def _default_index(run: Run) -> int:
    """The first child that did not complete, else the last one."""
    for child in run.children:
        if child.status is not RunStatus.COMPLETED:
            return child.index
    return len(run.children) - 1


def follow_up_input(prior: str, message: str) -> str:
    """What a resumed `command` child reads: the prior final text, then the follow-up."""
    if not prior:
        return message
    return prior + ("" if prior.endswith("\n") else "\n") + message


def resumed_child(
    target: Target,
    message: str,
    env: Mapping[str, str] | None,
    backends: Mapping[str, Backend],
) -> ChildPlan:
    """The child plan of the new attempt, from the contract (never from the request),
    with its launch prepared."""
    projection = target.contract.projection
    prior = target.run.children[target.index].output
    session = target.contract.backend_session_id
    # pi is given the file that was checked, not the id: by id it would look further.
    resume_session = target.session_file or session
    # An agent continues its own session, which holds the earlier turns; a
    # command is given the prior answer on stdin before the follow-up.
    prompt = message if session else follow_up_input(prior.text if prior else "", message)
    child = child_of(projection, prompt=prompt, resume_session=resume_session, env=env or {})
    return prepare_child(child, backends[child.backend])


def _children(count: int) -> str:
    """`1 child (index 0)`, `3 children (indices 0..2)`, `no children`."""
    if count == 0:
        return "no children"
    if count == 1:
        return "1 child (index 0)"
    return f"{plural(count, 'child', 'children')} (indices 0..{count - 1})"
