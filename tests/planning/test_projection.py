"""Launch projections: sealed, checked on the way back, and a resume runs what they say."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import attrs
import pytest

from subagent_host.backends.acp import AcpBackend
from subagent_host.backends.base import Backend
from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.command import CommandBackend
from subagent_host.backends.pi import PiBackend
from subagent_host.planning.plan import ChildPlan, RunPlan, WorkflowPlan
from subagent_host.planning.projection import (
    ProjectionProblem,
    check_overrides,
    contract,
    project,
    seal,
    unseal,
)
from subagent_host.planning.request import FilesystemAccess
from subagent_host.planning.stored_workflow import workflow_from_record, workflow_record
from subagent_host.planning.views import Access, PlanStep
from subagent_host.resuming.target import Target, resumed_child
from subagent_host.runs.state import ChildRun, Run, RunStatus
from subagent_host.values import RunKind, StepKind
from subagent_host.values.facts import OutputInfo
from subagent_host.values.placement import Placement
from tests.planning.conftest import to_json

BACKENDS: Final[dict[str, Backend]] = {"command": CommandBackend(), "claude": ClaudeBackend()}
CHILD = ChildPlan(
    backend="command",
    cwd="/tmp",
    timeout_ms=60_000,
    stall_timeout_ms=30_000,
    command=("sh", "-c", "cat"),
    prompt="first",
    env={"TOKEN": "secret-value"},
    access=Access(filesystem=FilesystemAccess.READ, process=True, network=False),
)


def test_a_projection_names_env_keys_never_values_and_keeps_access() -> None:
    stored, _ = seal(project(CHILD, CommandBackend()))
    projection = to_json(project(CHILD, CommandBackend()))
    assert projection["envKeys"] == ["TOKEN"] and "secret-value" not in stored
    assert projection["access"] == {"filesystem": "read", "process": True, "network": False}


def test_unseal_fails_closed_on_tampering_unknown_versions_and_absence() -> None:
    stored, digest = seal(project(CHILD, CommandBackend()))
    assert to_json(unseal(stored, digest))["argvTemplate"] == ["sh", "-c", "cat"]
    for bad_stored, bad_digest, code in (
        (stored.replace("cat", "rm"), digest, "projection-mismatch"),
        (stored.replace('"v":1', '"v":0'), digest, "projection-unsupported"),
        ("{not json", digest, "projection-corrupt"),
        (None, None, "projection-missing"),
    ):
        with pytest.raises(ProjectionProblem) as problem:
            unseal(bad_stored, bad_digest)
        assert problem.value.code == code


def test_only_lower_timeouts_may_be_overridden() -> None:
    projection = project(CHILD, CommandBackend())
    assert check_overrides(projection, {"timeoutMs": 1000, "stallTimeoutMs": 5}) == []
    assert check_overrides(projection, {"timeoutMs": 60_001}) == [
        "timeoutMs may only be lowered on resume (60001 > 60000)"
    ]
    assert check_overrides(projection, {"cwd": "/"}) == [
        "cwd cannot be changed on resume (only timeoutMs, stallTimeoutMs, maxTurns, "
        "maxTokens, maxCostUsd may be lowered, and access narrowed); to change it, launch anew"
    ]
    assert check_overrides(projection, {"timeoutMs": True}) == [
        "timeoutMs must be a positive integer"
    ]


def test_a_resumed_command_reads_the_prior_text_then_the_follow_up_and_keeps_access() -> None:
    projection = project(CHILD, CommandBackend())
    now = datetime.now(UTC)
    prior = OutputInfo(text="earlier answer", truncated=False, bytes=14, lines=1, partial=True)
    run = Run(
        run_id="r" * 32,
        session_id="s",
        kind=RunKind.SINGLE,
        fingerprint="f",
        created_at=now,
        children=[ChildRun(index=0, backend="command", status=RunStatus.FAILED, output=prior)],
        status=RunStatus.FAILED,
    )
    sealed = contract(run.run_id, 0, 2, projection, {"timeoutMs": 1000})
    target = Target(run=run, index=0, projection=projection, contract=sealed, contract_digest="")
    plan = resumed_child(target, "go on", {"TOKEN": "secret-value"}, BACKENDS)
    assert plan.command == ("sh", "-c", "cat") and plan.prompt == "earlier answer\ngo on"
    assert plan.timeout_ms == 1000 and plan.stall_timeout_ms == 30_000
    assert plan.access == CHILD.access and plan.env == {"TOKEN": "secret-value"}


AGENT = ChildPlan(
    backend="claude", cwd="/tmp", timeout_ms=60_000, stall_timeout_ms=30_000,
    prompt="look around", max_turns=5,
)  # fmt: skip


def test_max_turns_is_projected_and_a_resume_may_lower_it_never_raise_it() -> None:
    projection = project(AGENT, ClaudeBackend())
    shown = to_json(projection)
    assert shown["limits"]["maxTurns"] == 5
    assert shown["argvTemplate"][shown["argvTemplate"].index("--max-turns") + 1] == "5"
    assert check_overrides(projection, {"maxTurns": 2}) == []
    assert check_overrides(projection, {"maxTurns": 6}) == [
        "maxTurns may only be lowered on resume (6 > 5)"
    ]
    assert check_overrides(projection, {"maxTurns": 0}) == ["maxTurns must be a positive integer"]


def test_a_child_launched_without_max_turns_keeps_its_projection_and_may_get_one() -> None:
    unlimited = project(attrs.evolve(AGENT, max_turns=None), ClaudeBackend())
    assert "maxTurns" not in to_json(unlimited)["limits"]  # as projections stored before it existed
    assert check_overrides(unlimited, {"maxTurns": 3}) == []  # any limit is lower than none
    assert check_overrides(project(CHILD, CommandBackend()), {"maxTurns": 3}) == [
        "maxTurns cannot be honoured by the command backend"
    ]


def test_an_acp_childs_budgets_on_resume_are_the_protocols() -> None:
    qwen = AcpBackend("qwen", "qwen", ("--acp",), {})
    projection = project(attrs.evolve(AGENT, backend="qwen", max_turns=None), qwen)
    [refused] = check_overrides(projection, {"maxTokens": 1000}, qwen.protocol)
    assert refused.startswith("maxTokens cannot be enforced: an ACP agent reports tokens")
    assert check_overrides(projection, {"maxTurns": 3}, qwen.protocol) == []


def limited_run(backend: str) -> Run:
    """A single run whose agent child ended at a limit, with a session to continue."""
    return Run(
        run_id="r" * 32, session_id="s", kind=RunKind.SINGLE, fingerprint="f",
        created_at=datetime.now(UTC), status=RunStatus.LIMIT_REACHED,
        children=[ChildRun(index=0, backend=backend, status=RunStatus.LIMIT_REACHED,
                           backend_session_id="sess")],
    )  # fmt: skip


def test_a_resumed_agent_runs_with_the_lowered_max_turns() -> None:
    projection = project(AGENT, ClaudeBackend())
    run = limited_run("claude")
    sealed = contract(run.run_id, 0, 2, projection, {"maxTurns": 2}, backend_session_id="sess")
    target = Target(run=run, index=0, projection=projection, contract=sealed, contract_digest="")
    assert resumed_child(target, "go on", None, BACKENDS).max_turns == 2
    kept = contract(run.run_id, 0, 2, projection, {}, backend_session_id="sess")
    assert (
        resumed_child(attrs.evolve(target, contract=kept), "go on", None, BACKENDS).max_turns == 5
    )


def test_a_stored_workflow_keeps_each_item_templates_max_turns() -> None:
    plan = RunPlan(
        kind=RunKind.WORKFLOW,
        children=(AGENT, attrs.evolve(AGENT, max_turns=None)),
        workflow=WorkflowPlan(
            name="w", task="t", steps=(PlanStep(index=0, kind=StepKind.PARALLEL, items=(0, 1)),)
        ),
    )
    stored = workflow_from_record(json.loads(json.dumps(workflow_record(plan))))
    assert stored is not None
    assert [child.max_turns for child in stored.children] == [5, None]


PI_AGENT = attrs.evolve(AGENT, backend="pi", max_tokens=400, max_cost_usd=0.5)
PI_BACKENDS: Final[dict[str, Backend]] = {"pi": PiBackend(session_dir=Path("/tmp"))}


def test_budgets_are_projected_and_a_resume_may_lower_them_never_raise_them() -> None:
    projection = project(PI_AGENT, PI_BACKENDS["pi"])
    assert (to_json(projection)["limits"]["maxTokens"], projection.limits.max_cost_usd) == (
        400,
        0.5,
    )
    assert check_overrides(projection, {"maxTokens": 100, "maxCostUsd": 0.25}) == []
    assert check_overrides(projection, {"maxTokens": 400, "maxCostUsd": 0.5}) == []
    assert check_overrides(projection, {"maxTokens": 401, "maxCostUsd": 1}) == [
        "maxTokens may only be lowered on resume (401 > 400)",
        "maxCostUsd may only be lowered on resume (1 > 0.5)",
    ]
    for bad in (0, -1, 2**53, 1.5, True, "10"):
        assert check_overrides(projection, {"maxTokens": bad}) == [
            "maxTokens must be a positive integer"
        ], bad
    for bad in (0, -0.5, float("nan"), float("inf"), True, "0.1"):
        assert check_overrides(projection, {"maxCostUsd": bad}) == [
            "maxCostUsd must be a number above 0"
        ], bad


def test_a_child_launched_without_a_budget_may_get_one_where_its_cli_reports_it() -> None:
    unlimited = project(
        attrs.evolve(PI_AGENT, max_tokens=None, max_cost_usd=None), PI_BACKENDS["pi"]
    )
    assert not {"maxTokens", "maxCostUsd"} & set(to_json(unlimited)["limits"])
    assert check_overrides(unlimited, {"maxTokens": 10**9, "maxCostUsd": 100}) == []
    claude = project(AGENT, ClaudeBackend())
    assert check_overrides(claude, {"maxTokens": 10}) == []
    refused = check_overrides(claude, {"maxCostUsd": 1})
    assert refused == [
        "maxCostUsd cannot be enforced: claude reports its cost only in its final result, "
        "once the child has ended, so a cost budget cannot stop it"
    ]
    assert check_overrides(project(CHILD, CommandBackend()), {"maxTokens": 3}) == [
        "maxTokens cannot be honoured by the command backend"
    ]


def test_a_resumed_agent_runs_with_the_lowered_budgets() -> None:
    projection = project(PI_AGENT, PI_BACKENDS["pi"])
    run = limited_run("pi")
    lowered = {"maxTokens": 200, "maxCostUsd": 1}  # a whole number of dollars is a number
    sealed = contract(run.run_id, 0, 2, projection, lowered, backend_session_id="sess")
    assert sealed.projection.limits.max_cost_usd == 1.0
    target = Target(run=run, index=0, projection=projection, contract=sealed, contract_digest="")
    child = resumed_child(target, "go on", None, PI_BACKENDS)
    assert (child.max_tokens, child.max_cost_usd) == (200, 1.0)
    kept = contract(run.run_id, 0, 2, projection, {}, backend_session_id="sess")
    child = resumed_child(attrs.evolve(target, contract=kept), "go on", None, PI_BACKENDS)
    assert (child.max_tokens, child.max_cost_usd) == (400, 0.5)


def test_a_resumed_child_of_a_placed_run_keeps_its_placement() -> None:
    placement = Placement(resources={"gpu": 1.0}, node_id="node-a", labels={"zone": "b"})
    placed = attrs.evolve(CHILD, placement=placement)
    stored, digest = seal(project(placed, CommandBackend()))
    projection = unseal(stored, digest)  # as a resume reads it back from the store
    run = Run(
        run_id="r" * 32,
        session_id="s",
        kind=RunKind.SINGLE,
        fingerprint="f",
        created_at=datetime.now(UTC),
        children=[ChildRun(index=0, backend="command", status=RunStatus.FAILED)],
        status=RunStatus.FAILED,
    )
    sealed = contract(run.run_id, 0, 2, projection, {})
    # What preflight shows and the token is bound to says where it runs ...
    assert to_json(sealed)["projection"]["placement"] == {
        "resources": {"gpu": 1.0}, "nodeId": "node-a", "labels": {"zone": "b"}
    }  # fmt: skip
    target = Target(run=run, index=0, projection=projection, contract=sealed, contract_digest="")
    plan = resumed_child(target, "go on", {"TOKEN": "secret-value"}, BACKENDS)
    # ... and the new attempt runs there, as the first one did.
    assert plan.placement == placement
    # An unplaced child's projection is what it always was (no `placement` key).
    assert "placement" not in json.loads(seal(project(CHILD, CommandBackend()))[0])
