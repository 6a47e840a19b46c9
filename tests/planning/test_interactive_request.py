"""Interactive children and approvals on the request: `interactive`, `approvals`,
`idleTimeoutMs` and `permissionTimeoutMs` on the call and each item (an item's over the
call's, over its agent definition's, over the configuration's), into the child's plan,
its normalized view and fingerprint (only when set), and the diagnostics that refuse
what cannot be honoured (protocol.md §23)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagent_host.agents.discovery import AgentCatalog, discover
from subagent_host.backends.base import Backend
from subagent_host.backends.codex import CodexBackend
from subagent_host.config import DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_PERMISSION_TIMEOUT_MS
from subagent_host.planning.check import CheckedSpawn
from subagent_host.planning.items import AgentSources
from subagent_host.planning.plan import ChildPlan
from subagent_host.settings import Settings
from subagent_host.values import BACKGROUND_MODE, TASK_MODE
from subagent_host.values.choices import Approvals
from tests.planning.conftest import check_request, to_json
from tests.planning.test_launch_defaults import definition

CAT: Any = ["cat"]


@pytest.fixture
def every_backend(backends: dict[str, Backend], tmp_path: Path) -> dict[str, Backend]:
    """The conftest's backends, and codex as a program on the children's PATH too."""
    codex = tmp_path / "bin" / "codex"
    codex.write_text("#!/bin/sh\n")
    codex.chmod(0o755)
    return {**backends, "codex": CodexBackend()}


def planned(checked: CheckedSpawn) -> tuple[ChildPlan, ...]:
    assert checked.accepted, checked.diagnostics
    assert checked.plan is not None
    return checked.plan.children


def errors(checked: CheckedSpawn) -> list[tuple[str, str | None]]:
    return [(d.code, d.path) for d in checked.diagnostics if d.severity == "error"]


def message(checked: CheckedSpawn, code: str) -> str:
    return next(d.message for d in checked.diagnostics if d.code == code)


def test_a_child_is_one_shot_by_default_and_its_plan_shows_nothing_of_it(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check_request(backends, tmp_path, prompt="hi", backend="pi")
    [child] = planned(checked)
    assert (child.interactive, child.approvals) == (False, Approvals.CLI)
    assert (child.idle_timeout_ms, child.permission_timeout_ms) == (None, None)
    assert checked.plan is not None
    shown = to_json(checked.plan.normalized)["children"][0]
    assert "interactive" not in shown and "approvals" not in shown
    assert set(shown["limits"]) == {"timeoutMs", "stallTimeoutMs"}


def test_saying_the_defaults_out_loud_changes_no_fingerprint(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    """Only a set field is part of the plan: every plan made before these fields
    existed keeps its fingerprint (a preflight id issued for it stays good)."""
    quiet = check_request(backends, tmp_path, prompt="hi", backend="claude")
    loud = check_request(
        backends,
        tmp_path,
        prompt="hi",
        backend="claude",
        interactive=False,
        approvals="cli",
        idleTimeoutMs=5000,
        permissionTimeoutMs=5000,
    )
    assert quiet.plan is not None and loud.plan is not None
    assert loud.plan.fingerprint == quiet.plan.fingerprint
    assert to_json(loud.plan.normalized) == to_json(quiet.plan.normalized)


def test_an_interactive_child_is_planned_with_its_idle_timeout_and_its_drivers_launch(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    one_shot = check_request(backends, tmp_path, prompt="hi", backend="pi")
    checked = check_request(backends, tmp_path, prompt="hi", backend="pi", interactive=True)
    [child] = planned(checked)
    assert child.interactive and child.driven
    assert child.idle_timeout_ms == DEFAULT_IDLE_TIMEOUT_MS
    assert child.permission_timeout_ms is None  # nobody but pi answers its permissions
    assert child.launch is not None and child.launch.stdin is None  # kept open
    assert checked.plan is not None and one_shot.plan is not None
    shown = to_json(checked.plan.normalized)["children"][0]
    assert shown["interactive"] is True and "approvals" not in shown
    assert shown["limits"]["idleTimeoutMs"] == DEFAULT_IDLE_TIMEOUT_MS
    assert "rpc" in shown["argv"]  # pi --mode rpc: what would be executed
    assert checked.plan.fingerprint != one_shot.plan.fingerprint
    assert checked.interactive == ("interactive",)


def test_an_items_fields_override_the_calls(backends: dict[str, Backend], tmp_path: Path) -> None:
    checked = check_request(
        backends,
        tmp_path,
        interactive=True,
        idleTimeoutMs=1000,
        tasks=[
            {"command": CAT},
            {"command": CAT, "idleTimeoutMs": 2000},
            {"command": CAT, "interactive": False},
        ],
    )
    first, second, third = planned(checked)
    assert (first.interactive, first.idle_timeout_ms) == (True, 1000)
    assert (second.interactive, second.idle_timeout_ms) == (True, 2000)
    assert (third.interactive, third.idle_timeout_ms) == (False, None)
    assert checked.interactive == ("tasks[0].interactive", "tasks[1].interactive")


def test_a_client_answering_gets_a_permission_timeout_and_policy_none(
    every_backend: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check_request(
        every_backend,
        tmp_path,
        tasks=[
            {"prompt": "a", "backend": "claude", "approvals": "client"},
            {"prompt": "b", "backend": "codex", "approvals": "client", "permissionTimeoutMs": 9},
            {"prompt": "c", "backend": "claude", "approvals": "policy"},
        ],
    )
    client, short, policy = planned(checked)
    assert (client.approvals, client.permission_timeout_ms) == (
        Approvals.CLIENT,
        DEFAULT_PERMISSION_TIMEOUT_MS,
    )
    assert (short.approvals, short.permission_timeout_ms) == (Approvals.CLIENT, 9)
    assert (policy.approvals, policy.permission_timeout_ms) == (Approvals.POLICY, None)
    # Driven, not interactive: started through its machine protocol, no idle wait.
    assert policy.driven and not policy.interactive and policy.idle_timeout_ms is None
    assert checked.plan is not None
    shown = to_json(checked.plan.normalized)["children"]
    assert [c.get("approvals") for c in shown] == ["client", "client", "policy"]
    assert shown[1]["limits"]["permissionTimeoutMs"] == 9
    assert "permissionTimeoutMs" not in shown[2]["limits"]


def test_an_approvals_outside_the_set_is_a_diagnostic_of_its_own(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check_request(
        backends, tmp_path, tasks=[{"prompt": "a", "backend": "claude", "approvals": "always"}]
    )
    assert errors(checked) == [("invalid-approvals", "tasks[0].approvals")]
    assert "cli, client, policy" in message(checked, "invalid-approvals")


@pytest.mark.parametrize(
    ("request_fields", "backend"),
    [
        ({"prompt": "hi", "backend": "pi", "approvals": "client"}, "pi"),
        ({"prompt": "hi", "backend": "pi", "approvals": "policy", "interactive": True}, "pi"),
        ({"command": CAT, "approvals": "policy"}, "command"),
    ],
)
def test_approvals_a_cli_cannot_ask_for_are_refused_before_any_launch_is_rendered(
    backends: dict[str, Backend], tmp_path: Path, request_fields: dict[str, Any], backend: str
) -> None:
    checked = check_request(backends, tmp_path, **request_fields)
    assert errors(checked) == [("approvals-unsupported", "approvals")]
    assert checked.plan is None
    assert message(checked, "approvals-unsupported").startswith(
        f"{backend} cannot ask before its tools run"
    )


@pytest.mark.parametrize("field", ["idleTimeoutMs", "permissionTimeoutMs"])
@pytest.mark.parametrize("value", [0, 86_400_001])
def test_the_timeouts_are_range_checked_like_timeout_ms(
    backends: dict[str, Backend], tmp_path: Path, field: str, value: int
) -> None:
    request: dict[str, Any] = {"chain": [{"prompt": "x", field: value}]}
    checked = check_request(
        backends, tmp_path, None, interactive=True, approvals="client", backend="claude", **request
    )
    assert errors(checked) == [("invalid-duration", f"chain[0].{field}")]


def test_a_cluster_executor_takes_an_interactive_child_as_this_machine_does(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    on_a_cluster = AgentSources(placeable=True)
    checked = check_request(backends, tmp_path, on_a_cluster, command=CAT, interactive=True)
    assert checked.accepted and not checked.diagnostics, checked.diagnostics
    [talking] = planned(checked)
    assert talking.interactive and talking.driven
    asking = check_request(
        backends, tmp_path, on_a_cluster, prompt="hi", backend="claude", approvals="policy"
    )
    assert asking.accepted, asking.diagnostics
    assert planned(asking)[0].approvals is Approvals.POLICY


@pytest.fixture
def catalog(tmp_path: Path) -> AgentCatalog:
    user = tmp_path / "config"
    definition(user / "agents", "talker", interactive="true", approvals="policy")
    definition(user / "agents", "quiet", interactive="false", subagent_mode="task")
    definition(user / "agents", "plain", subagent_mode="task")
    return discover(user, tmp_path / "project")


def test_the_request_wins_over_the_definition_which_wins_over_the_configuration(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog
) -> None:
    sources = AgentSources(settings=Settings(approvals="client"), catalog=catalog)
    checked = check_request(
        backends,
        tmp_path,
        sources,
        backend="claude",
        tasks=[
            {"agent": "talker"},
            {"agent": "talker", "interactive": False, "approvals": "cli"},
            {"agent": "plain"},
            {"agent": "quiet", "interactive": True},
        ],
    )
    talker, told, plain, quiet = planned(checked)
    assert (talker.interactive, talker.approvals) == (True, Approvals.POLICY)
    assert (told.interactive, told.approvals) == (False, Approvals.CLI)
    assert (plain.interactive, plain.approvals) == (False, Approvals.CLIENT)
    assert (quiet.interactive, quiet.approvals) == (True, Approvals.CLIENT)


def test_an_interactive_member_runs_in_the_background_whatever_its_definition_says(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog
) -> None:
    """`plain` and `quiet` resolve `task` (their `subagent_mode`); an interactive member
    would never let a task-mode answer come, so it runs in the background."""
    sources = AgentSources(catalog=catalog)
    mixed = check_request(
        backends,
        tmp_path,
        sources,
        backend="claude",
        tasks=[{"agent": "plain"}, {"agent": "quiet", "interactive": True}],
    )
    assert (mixed.mode, mixed.background) == (TASK_MODE, (1,))
    single = check_request(
        backends, tmp_path, sources, backend="claude", agent="quiet", interactive=True
    )
    assert single.mode == BACKGROUND_MODE
    assert single.interactive == ("interactive",)


def test_a_workflow_items_interactive_is_found_at_its_path(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check_request(
        backends,
        tmp_path,
        workflow={
            "name": "w",
            "task": "t",
            "chain": [{"command": CAT}, {"parallel": [{"command": CAT, "interactive": True}]}],
        },
    )
    assert [child.interactive for child in planned(checked)] == [False, True]
    assert checked.interactive == ("workflow.chain[1].parallel[0].interactive",)
    assert checked.mode == BACKGROUND_MODE


def test_a_configured_approvals_is_not_applied_to_a_child_that_cannot_take_it(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog
) -> None:
    """A default meant for every child does not refuse the ones whose CLI cannot ask:
    they run with `cli`, and a warning says so; a definition's is the child's own."""
    sources = AgentSources(settings=Settings(approvals="policy"), catalog=catalog)
    checked = check_request(
        backends,
        tmp_path,
        sources,
        tasks=[{"prompt": "a", "backend": "pi"}, {"prompt": "b", "backend": "claude"}],
    )
    pi, claude = planned(checked)
    assert (pi.approvals, claude.approvals) == (Approvals.CLI, Approvals.POLICY)
    [warning] = [d for d in checked.diagnostics if d.severity == "warning"]
    assert (warning.code, warning.path) == ("approvals-unsupported", "tasks[0].approvals")
    assert warning.message.startswith(
        "the configured approvals 'policy' is not applied to this pi child: pi cannot ask"
    )
    defined = check_request(backends, tmp_path, sources, agent="talker", backend="pi")
    assert errors(defined) == [("approvals-unsupported", "approvals")]
    on_a_cluster = AgentSources(settings=Settings(approvals="client"), placeable=True)
    clustered = check_request(backends, tmp_path, on_a_cluster, prompt="c", backend="claude")
    assert planned(clustered)[0].approvals is Approvals.CLIENT  # as on this machine
    assert not clustered.diagnostics, clustered.diagnostics
