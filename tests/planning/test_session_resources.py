"""Lean children: `session_resources` (`lean` by default) starts each agent CLI with its
own switches for loading none of the user's or project's extensions, skills, prompt
templates and context files; `full` without them. It comes from the request, then the
agent definition, then the configuration, and is part of the plan, its fingerprint, the
receipts and the launch projection a resume runs from."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest

from subagent_host.agents.definitions import USER, parse_definition
from subagent_host.agents.discovery import AgentCatalog, discover
from subagent_host.backends.base import Backend, ItemSpec
from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.codex import CodexBackend
from subagent_host.backends.pi import PiBackend
from subagent_host.planning.check import CheckedSpawn
from subagent_host.planning.items import AgentSources
from subagent_host.planning.normalized import normalized_plan, plan_fingerprint
from subagent_host.planning.plan import ChildPlan
from subagent_host.planning.projection import contract, project, seal, unseal
from subagent_host.planning.receipts import receipts
from subagent_host.planning.views import Access, Projection
from subagent_host.resuming.target import Target, resumed_child
from subagent_host.runs.state import ChildRun, Run, RunStatus
from subagent_host.settings import Settings, load_settings
from subagent_host.values import RunKind, SessionResources
from tests.planning.conftest import LIMITS, check_request, to_json
from tests.planning.test_launch_defaults import definition

PI_LEAN = ["--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files"]
CLAUDE_LEAN = ["--safe-mode"]
CODEX_LEAN = [
    "-c", "project_doc_max_bytes=0", "-c", "skills.include_instructions=false",
    "--disable", "hooks", "--disable", "plugins", "--disable", "apps",
]  # fmt: skip


def spec(resources: str, **fields: Any) -> ItemSpec:
    return ItemSpec(
        command=None, prompt="hi", cwd="/", env={}, session_resources=resources, **fields
    )


def contains(argv: tuple[str, ...], flags: list[str]) -> bool:
    return any(list(argv[i : i + len(flags)]) == flags for i in range(len(argv)))


@pytest.mark.parametrize(
    ("backend", "flags"),
    [
        (PiBackend(session_dir=Path("/state")), PI_LEAN),
        (ClaudeBackend(), CLAUDE_LEAN),
        (CodexBackend(), CODEX_LEAN),
    ],
    ids=["pi", "claude", "codex"],
)
def test_lean_adds_each_clis_own_switches_and_full_leaves_them_out(
    backend: Backend, flags: list[str]
) -> None:
    lean = backend.prepare(spec("lean")).argv
    full = backend.prepare(spec("full")).argv
    assert contains(lean, flags) and not any(flag in full for flag in flags if flag != "-c")
    assert [arg for arg in lean if arg not in flags] == [arg for arg in full if arg not in flags]
    # Resumed children get them too, before codex's `resume` subcommand.
    resumed = backend.prepare(spec("lean", resume_session="0190c0de-0000-7000-8000-000000000000"))
    assert contains(resumed.argv, flags)
    if isinstance(backend, CodexBackend):
        assert resumed.argv.index("resume") > resumed.argv.index("--disable")


@pytest.fixture
def catalog(tmp_path: Path) -> AgentCatalog:
    user = tmp_path / "config"
    definition(user / "agents", "rich", session_resources="full")
    definition(user / "agents", "plain")
    return discover(user, tmp_path / "project")


def check(
    backends: dict[str, Backend],
    tmp_path: Path,
    settings: Settings | None = None,
    catalog: AgentCatalog | None = None,
    **request: Any,
) -> CheckedSpawn:
    return check_request(
        backends,
        tmp_path,
        AgentSources(settings=settings or Settings(), catalog=catalog),
        **request,
    )


def resources(checked: CheckedSpawn) -> list[str | None]:
    assert checked.accepted and checked.plan is not None, checked.diagnostics
    return [child.session_resources for child in checked.plan.children]


@pytest.mark.parametrize(
    ("request_value", "agent", "configured", "expected"),
    [
        (None, None, None, "lean"),  # the default
        (None, None, "full", "full"),  # the configuration
        (None, "rich", "lean", "full"),  # the definition over the configuration
        (None, "plain", "full", "full"),  # a definition that does not say
        ("lean", "rich", "full", "lean"),  # the request over both
    ],
)
def test_session_resources_come_from_the_request_the_definition_then_the_configuration(
    backends: dict[str, Backend],
    tmp_path: Path,
    catalog: AgentCatalog,
    request_value: str | None,
    agent: str | None,
    configured: str | None,
    expected: str,
) -> None:
    request: dict[str, Any] = {"prompt": "hi", "backend": "pi"}
    if request_value is not None:
        request["sessionResources"] = request_value
    if agent is not None:
        request["agent"] = agent
    settings = Settings(session_resources=configured)
    assert resources(check(backends, tmp_path, settings, catalog, **request)) == [expected]


def test_an_items_value_overrides_the_calls_and_a_command_child_has_none(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        sessionResources="full",
        tasks=[{"prompt": "a"}, {"prompt": "b", "sessionResources": "lean"}],
    )
    assert resources(checked) == ["full", "lean"]
    mixed = check(backends, tmp_path, tasks=[{"prompt": "a"}, {"command": ["true"]}])
    assert resources(mixed) == ["lean", None]


def test_a_bad_value_or_one_given_to_a_command_is_a_diagnostic(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    bad = check(backends, tmp_path, prompt="hi", sessionResources="slim")
    assert [(d.code, d.path) for d in bad.diagnostics if d.severity == "error"] == [
        ("invalid-session-resources", "sessionResources")
    ]
    command = check(backends, tmp_path, command=["true"], sessionResources="lean")
    assert [(d.code, d.path) for d in command.diagnostics if d.severity == "error"] == [
        ("not-honoured", "sessionResources")
    ]


def test_the_plan_fingerprint_and_receipts_carry_it(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    lean = check(backends, tmp_path, prompt="hi", backend="claude")
    full = check(backends, tmp_path, prompt="hi", backend="claude", sessionResources="full")
    assert lean.plan is not None and full.plan is not None
    shown = to_json(normalized_plan(lean.plan, backends))["children"][0]
    assert shown["sessionResources"] == "lean" and "--safe-mode" in shown["argv"]
    assert (
        to_json(normalized_plan(full.plan, backends))["children"][0]["sessionResources"] == "full"
    )
    assert plan_fingerprint(normalized_plan(lean.plan, backends, None)) != plan_fingerprint(
        normalized_plan(full.plan, backends, None)
    )
    child = to_json(receipts(lean.plan, backends, Access(), LIMITS))["access"]
    assert child["children"][0]["sessionResources"] == "lean"


CHILD = ChildPlan(
    backend="pi", cwd="/tmp", timeout_ms=60_000, stall_timeout_ms=30_000, prompt="first"
)


def target(projection: Projection) -> Target:
    child = ChildRun(index=0, backend="pi", status=RunStatus.COMPLETED)
    run = Run(
        run_id="r" * 32,
        session_id="s",
        kind=RunKind.SINGLE,
        fingerprint="f",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        children=[child],
        status=RunStatus.COMPLETED,
    )
    sealed = contract(run.run_id, 0, 2, projection, {}, backend_session_id="s1")
    return Target(run=run, index=0, projection=projection, contract=sealed, contract_digest="")


def test_a_resume_runs_with_the_launchs_value_and_an_old_projection_without_it_runs_full(
    tmp_path: Path,
) -> None:
    backend = PiBackend(session_dir=tmp_path)
    lean = project(attrs.evolve(CHILD, session_resources=SessionResources.LEAN), backend)
    assert to_json(lean)["sessionResources"] == "lean"
    assert to_json(unseal(*seal(lean)))["sessionResources"] == "lean"
    again = resumed_child(target(lean), "more", None, {"pi": backend})
    assert again.session_resources == "lean"
    assert "--no-context-files" in backend.prepare(again.item()).argv
    # A projection sealed before the field existed has none: its child ran full.
    old = project(CHILD, backend)
    assert "sessionResources" not in to_json(old)
    stored, digest = seal(old)
    assert unseal(stored, digest) == old
    before = resumed_child(target(old), "more", None, {"pi": backend})
    assert before.session_resources is None
    assert "--no-context-files" not in backend.prepare(before.item()).argv


def test_a_configuration_file_and_a_definition_take_lean_or_full_only(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "subagents.json").write_text(json.dumps({"session_resources": "full"}))
    settings, _ = load_settings(config_dir=config, project_dir=tmp_path, explicit=None, trusted=())
    assert settings.session_resources == "full"
    (config / "subagents.json").write_text(json.dumps({"session_resources": "slim"}))
    settings, _ = load_settings(config_dir=config, project_dir=tmp_path, explicit=None, trusted=())
    assert settings.session_resources is None
    assert [d.field for d in settings.diagnostics] == ["session_resources"]

    def parse(value: str) -> Any:
        text = f"---\nname: a\ndescription: d\nsession_resources: {value}\n---\nbody\n"
        return parse_definition(text.encode(), path="/a.md", source=USER)

    found, notes = parse("full")
    assert found is not None and found.session_resources == "full" and notes == []
    found, notes = parse("slim")
    assert found is None and [d.code for d in notes] == ["invalid-session-resources"]
