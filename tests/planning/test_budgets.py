"""`maxTokens` and `maxCostUsd` at launch: checked like `maxTurns`, agent backends whose CLI
reports the usage while it runs only, chosen from the request, the agent definition and
the configuration, part of the plan and its fingerprint, and `host-hard` in the receipts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagent_host.agents.discovery import discover
from subagent_host.backends.base import Backend
from subagent_host.backends.codex import CodexBackend
from subagent_host.planning.check import CheckedSpawn
from subagent_host.planning.items import AgentSources
from subagent_host.planning.normalized import normalized_plan, plan_fingerprint
from subagent_host.planning.receipts import receipts
from subagent_host.planning.views import Access
from subagent_host.settings import Settings
from tests.planning.conftest import LIMITS, check_request, to_json
from tests.planning.test_launch_defaults import definition

MOST_TOKENS = 2**53 - 1


@pytest.fixture
def everything(backends: dict[str, Backend], tmp_path: Path) -> dict[str, Backend]:
    """The agent backends of `backends`, and codex, each found on the children's PATH."""
    (tmp_path / "bin" / "codex").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "codex").chmod(0o755)
    return {**backends, "codex": CodexBackend()}


def check(
    backends: dict[str, Backend],
    tmp_path: Path,
    settings: Settings | None = None,
    **request: Any,
) -> CheckedSpawn:
    user = tmp_path / "config"
    definition(user / "agents", "frugal", max_tokens="500", max_cost_usd="0.25")
    definition(user / "agents", "plain")
    sources = AgentSources(settings=settings or Settings(), catalog=discover(user, None))
    return check_request(backends, tmp_path, sources, **request)


def found(checked: CheckedSpawn, severity: str = "error") -> list[tuple[str, str | None]]:
    return [(d.code, d.path) for d in checked.diagnostics if d.severity == severity]


def budgets(checked: CheckedSpawn) -> list[tuple[int | None, float | None]]:
    assert checked.accepted, checked.diagnostics
    assert checked.plan is not None
    return [(child.max_tokens, child.max_cost_usd) for child in checked.plan.children]


def test_max_tokens_must_be_a_positive_safe_integer(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    for bad in (0, -1, MOST_TOKENS + 1, 2**64):
        assert found(check(backends, tmp_path, prompt="hi", maxTokens=bad)) == [
            ("invalid-max-tokens", "maxTokens")
        ], bad
    assert budgets(check(backends, tmp_path, prompt="hi", maxTokens=MOST_TOKENS)) == [
        (MOST_TOKENS, None)
    ]
    tasks = [{"prompt": "a", "maxTokens": 0}]
    assert found(check(backends, tmp_path, tasks=tasks)) == [
        ("invalid-max-tokens", "tasks[0].maxTokens")
    ]


def test_max_cost_usd_must_be_a_positive_number(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    for bad in (0, 0.0, -0.5, -3):
        assert found(check(backends, tmp_path, prompt="hi", maxCostUsd=bad)) == [
            ("invalid-max-cost-usd", "maxCostUsd")
        ], bad
    assert budgets(check(backends, tmp_path, prompt="hi", maxCostUsd=2)) == [(None, 2.0)]
    assert budgets(check(backends, tmp_path, prompt="hi", maxCostUsd=0.001)) == [(None, 0.001)]


def test_a_command_cannot_take_a_budget(backends: dict[str, Backend], tmp_path: Path) -> None:
    checked = check(backends, tmp_path, command=["true"], maxTokens=10, maxCostUsd=1)
    assert found(checked) == [("not-honoured", "maxTokens"), ("not-honoured", "maxCostUsd")]
    # A configured default is for agent children: a command child runs without it.
    configured = Settings(max_tokens=10, max_cost_usd=1.0)
    assert budgets(check(backends, tmp_path, configured, command=["true"])) == [(None, None)]


def test_a_budget_the_backends_cli_does_not_report_while_it_runs_is_refused(
    everything: dict[str, Backend], tmp_path: Path
) -> None:
    claude = check(everything, tmp_path, prompt="hi", backend="claude", maxCostUsd=1)
    assert found(claude) == [("cost-not-reported", "maxCostUsd")]
    assert "final result" in claude.diagnostics[0].message
    codex = check(everything, tmp_path, prompt="hi", backend="codex", maxTokens=9, maxCostUsd=1)
    assert found(codex) == [
        ("tokens-not-reported", "maxTokens"),
        ("cost-not-reported", "maxCostUsd"),
    ]
    # An agent definition's budget is asked for as much as the request's.
    frugal = check(everything, tmp_path, agent="frugal", backend="codex")
    assert found(frugal) == [
        ("tokens-not-reported", "maxTokens"),
        ("cost-not-reported", "maxCostUsd"),
    ]
    assert budgets(check(everything, tmp_path, prompt="hi", backend="claude", maxTokens=9)) == [
        (9, None)
    ]


def test_a_configured_budget_a_cli_cannot_enforce_is_not_applied_and_says_so(
    everything: dict[str, Backend], tmp_path: Path
) -> None:
    configured = Settings(max_tokens=100, max_cost_usd=0.5)
    codex = check(everything, tmp_path, configured, prompt="hi", backend="codex")
    assert budgets(codex) == [(None, None)]
    assert found(codex, "warning") == [
        ("tokens-not-reported", "maxTokens"),
        ("cost-not-reported", "maxCostUsd"),
    ]
    claude = check(everything, tmp_path, configured, prompt="hi", backend="claude")
    assert budgets(claude) == [(100, None)]
    assert found(claude, "warning") == [("cost-not-reported", "maxCostUsd")]


def test_the_request_wins_then_the_item_then_the_definition_then_the_configuration(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    configured = Settings(max_tokens=900, max_cost_usd=9.0)
    assert budgets(check(backends, tmp_path, configured, prompt="hi")) == [(900, 9.0)]
    assert budgets(check(backends, tmp_path, configured, agent="frugal")) == [(500, 0.25)]
    assert budgets(check(backends, tmp_path, configured, agent="plain")) == [(900, 9.0)]
    call = check(backends, tmp_path, configured, agent="frugal", maxTokens=700)
    assert budgets(call) == [(700, 0.25)]
    tasks = [
        {"agent": "frugal"},
        {"agent": "frugal", "maxTokens": 60, "maxCostUsd": 0.5},
        {"prompt": "b"},
    ]
    items = check(backends, tmp_path, configured, tasks=tasks, maxTokens=80)
    assert budgets(items) == [(80, 0.25), (60, 0.5), (80, 9.0)]


def test_budgets_are_in_the_plan_its_fingerprint_and_the_receipts_as_host_hard(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    limited = check(backends, tmp_path, prompt="hi", maxTokens=300, maxCostUsd=0.5).plan
    plain = check(backends, tmp_path, prompt="hi").plan
    assert limited is not None and plain is not None
    child = to_json(normalized_plan(limited, backends))["children"][0]
    assert (child["limits"]["maxTokens"], child["limits"]["maxCostUsd"]) == (300, 0.5)
    shown = to_json(normalized_plan(plain, backends))["children"][0]["limits"]
    assert "maxTokens" not in shown and "maxCostUsd" not in shown
    fingerprints = {
        plan_fingerprint(normalized_plan(plan, backends))
        for plan in (
            limited,
            plain,
            check(backends, tmp_path, prompt="hi", maxTokens=301, maxCostUsd=0.5).plan,
            check(backends, tmp_path, prompt="hi", maxTokens=300, maxCostUsd=0.6).plan,
        )
        if plan is not None
    }
    assert len(fingerprints) == 4
    limits = {limit.name: limit for limit in receipts(limited, backends, Access(), LIMITS).limits}
    assert (limits["maxTokens"].value, limits["maxTokens"].enforcement) == (300, "host-hard")
    assert (limits["maxCostUsd"].value, limits["maxCostUsd"].enforcement) == (0.5, "host-hard")
    unlimited = {limit.name for limit in receipts(plain, backends, Access(), LIMITS).limits}
    assert not unlimited & {"maxTokens", "maxCostUsd"}


def test_a_required_budget_needs_every_child_to_have_one(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    each: list[tuple[str, Any]] = [("maxTokens", 50), ("maxCostUsd", 0.5)]
    for name, value in each:
        required: dict[str, Any] = {"requiredLimits": [name]}
        assert check(backends, tmp_path, prompt="hi", **{name: value}, **required).accepted
        assert found(check(backends, tmp_path, prompt="hi", **required)) == [
            ("limit-not-offered", "requiredLimits[0]")
        ]
        tasks: list[dict[str, Any]] = [{"prompt": "a", name: value}, {"prompt": "b"}]
        refused = check(backends, tmp_path, tasks=tasks, **required)
        assert found(refused) == [("limit-not-offered", "requiredLimits[0]")]
        assert "none for children 1" in refused.diagnostics[0].message
