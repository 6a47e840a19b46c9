"""`maxTurns` at launch: checked like the timeouts, agent backends only, part of the plan
and its fingerprint, and listed in the receipts as `host-hard` (the server counts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagent_host.backends.base import Backend
from subagent_host.planning.check import CheckedSpawn
from subagent_host.planning.normalized import normalized_plan, plan_fingerprint
from subagent_host.planning.receipts import receipts
from subagent_host.planning.views import Access
from tests.planning.conftest import LIMITS, check_request, to_json


def check(backends: dict[str, Backend], tmp_path: Path, **request: Any) -> CheckedSpawn:
    return check_request(backends, tmp_path, **request)


def errors(checked: CheckedSpawn) -> list[tuple[str, str | None]]:
    return [(d.code, d.path) for d in checked.diagnostics if d.severity == "error"]


def test_max_turns_must_be_a_positive_number_of_responses(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    assert errors(check(backends, tmp_path, prompt="hi", maxTurns=0)) == [
        ("invalid-max-turns", "maxTurns")
    ]
    assert errors(check(backends, tmp_path, prompt="hi", maxTurns=100_001)) == [
        ("invalid-max-turns", "maxTurns")
    ]
    tasks = [{"prompt": "a", "maxTurns": -1}]
    assert errors(check(backends, tmp_path, tasks=tasks)) == [
        ("invalid-max-turns", "tasks[0].maxTurns")
    ]


def test_an_items_max_turns_overrides_the_calls(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    tasks = [{"prompt": "a"}, {"prompt": "b", "maxTurns": 7}]
    checked = check(backends, tmp_path, tasks=tasks, maxTurns=3)
    assert checked.accepted and checked.plan is not None
    assert [child.max_turns for child in checked.plan.children] == [3, 7]


def test_a_command_cannot_honour_max_turns(backends: dict[str, Backend], tmp_path: Path) -> None:
    checked = check(backends, tmp_path, command=["true"], maxTurns=2)
    assert errors(checked) == [("not-honoured", "maxTurns")]
    assert "maxTurns" in checked.diagnostics[0].message


def test_max_turns_is_in_the_plan_its_fingerprint_and_claudes_argv(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    limited = check(backends, tmp_path, prompt="hi", backend="claude", maxTurns=4).plan
    plain = check(backends, tmp_path, prompt="hi", backend="claude").plan
    assert limited is not None and plain is not None
    child = to_json(normalized_plan(limited, backends))["children"][0]
    assert child["limits"]["maxTurns"] == 4
    assert child["argv"][child["argv"].index("--max-turns") + 1] == "4"
    assert "maxTurns" not in to_json(normalized_plan(plain, backends))["children"][0]["limits"]
    assert plan_fingerprint(normalized_plan(limited, backends, None)) != plan_fingerprint(
        normalized_plan(plain, backends, None)
    )


def test_receipts_list_max_turns_as_host_hard_for_every_cli(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    for backend in ("pi", "claude"):
        plan = check(backends, tmp_path, prompt="hi", backend=backend, maxTurns=4).plan
        assert plan is not None
        limits = {
            limit["name"]: limit
            for limit in to_json(receipts(plan, backends, Access(), LIMITS))["limits"]
        }
        assert (limits["maxTurns"]["value"], limits["maxTurns"]["enforcement"]) == (4, "host-hard")
    plain = check(backends, tmp_path, prompt="hi").plan
    assert plain is not None
    assert "maxTurns" not in {
        limit["name"] for limit in to_json(receipts(plain, backends, Access(), LIMITS))["limits"]
    }


def test_required_max_turns_needs_every_child_to_have_one(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    required = {"requiredLimits": ["maxTurns"]}
    assert check(backends, tmp_path, prompt="hi", maxTurns=2, **required).accepted
    assert errors(check(backends, tmp_path, prompt="hi", **required)) == [
        ("limit-not-offered", "requiredLimits[0]")
    ]
    tasks = [{"prompt": "a", "maxTurns": 2}, {"prompt": "b"}]
    assert errors(check(backends, tmp_path, tasks=tasks, **required)) == [
        ("limit-not-offered", "requiredLimits[0]")
    ]
