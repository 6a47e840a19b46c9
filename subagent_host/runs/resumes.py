"""Protected resume: the target of a resume, and what it would run, rebuilt from the store.

Both `preflight {resume}` and `resume` call `resolve_target`: the run (this
session's), the child (`index`, by default the first that did not complete),
its stored launch projection (checked against its digest), the overrides (only
lowering `timeoutMs`/`stallTimeoutMs`), and the contract that results, whose
digest a token is bound to. Nothing here starts a process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from subagent_host.runs import history
from subagent_host.runs.catalog import RunCatalog
from subagent_host.runs.fingerprint import fingerprint
from subagent_host.runs.plans import Access, ChildPlan
from subagent_host.runs.projection import (
    GUIDANCE,
    ProjectionProblem,
    check_overrides,
    contract,
    unseal,
)
from subagent_host.runs.state import TERMINAL, Run, RunStatus


class ResumeRefused(Exception):
    """The target cannot be resumed. `reason` is CONTRACT §5's; `code` says exactly why."""

    def __init__(self, reason: str, code: str, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code
        self.message = message
        self.path = path


@attrs.frozen
class Target:
    run: Run
    index: int
    projection: dict[str, Any]
    contract: dict[str, Any]
    contract_digest: str


async def resolve_target(
    catalog: RunCatalog,
    session_id: str,
    run_id: str,
    index: int | None,
    overrides: Mapping[str, Any],
) -> Target:
    """Find and check what a resume would run; RunNotFound/AmbiguousRunId or ResumeRefused."""
    run = await catalog.find(session_id, run_id)
    chosen = _default_index(run) if index is None else index
    if not 0 <= chosen < len(run.children):
        raise ResumeRefused(
            "not-resumable",
            "invalid-index",
            f"run {run.run_id} has children 0..{len(run.children) - 1}, not {chosen}",
            "resume.index",
        )
    child = run.children[chosen]
    if not run.is_terminal or child.status not in TERMINAL:
        raise ResumeRefused(
            "not-resumable",
            "still-running",
            f"child {chosen} of run {run.run_id} is {child.status}: wait for it to end, or stop it",
        )
    stored, digest = await catalog.store.call(
        history.load_projection, catalog.store, run.run_id, chosen
    )
    try:
        projection = unseal(stored, digest)
    except ProjectionProblem as problem:
        raise ResumeRefused("not-resumable", problem.code, problem.message) from None
    refused = check_overrides(projection, overrides)
    if refused:
        raise ResumeRefused(
            "override-not-allowed", "override-not-allowed", "; ".join(refused), "resume.overrides"
        )
    if projection["envKeys"] and catalog.manager.env_of(run.run_id, chosen) is None:
        raise ResumeRefused(
            "not-resumable",
            "environment-gone",
            "this child was launched with `env` values, which are never stored and this "
            f"server process no longer has; {GUIDANCE}",
        )
    sealed = contract(
        run.run_id, chosen, child.attempt + 1, projection, overrides, child.backend_session_id
    )
    return Target(
        run=run,
        index=chosen,
        projection=projection,
        contract=sealed,
        contract_digest=fingerprint(sealed),
    )


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


def resumed_child(target: Target, message: str, env: Mapping[str, str] | None) -> ChildPlan:
    """The child plan of the new attempt, from the contract (never from the request)."""
    projection = target.contract["projection"]
    prior = target.run.children[target.index].output
    tools = projection["tools"]
    session = target.contract.get("backendSessionId")
    is_command = projection["backend"] == "command"
    return ChildPlan(
        backend=projection["backend"],
        cwd=projection["cwd"],
        timeout_ms=projection["limits"]["timeoutMs"],
        stall_timeout_ms=projection["limits"]["stallTimeoutMs"],
        command=tuple(projection["argvTemplate"]) if is_command else None,
        # An agent continues its own session, which holds the earlier turns; a
        # command is given the prior answer on stdin before the follow-up.
        prompt=message if session else follow_up_input(prior.text if prior else "", message),
        resume_session=session,
        access=Access(**projection["access"]) if projection.get("access") else None,
        env=dict(env or {}),
        label=projection["label"],
        model=projection["model"],
        thinking=projection["thinking"],
        tools=tuple(tool["name"] for tool in tools) if tools is not None else None,
    )
