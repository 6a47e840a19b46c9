"""What the configuration files and agent definitions change in a launch.

Model and effort: the request, then the agent's `model_profiles` entry (the
project's profiles for project agents, the user's for the user's), then the
definition, then `default_model` / `default_effort`. Tools: the request, the
definition, `default_tools`. Mode: the request, the definition's
`subagent_mode`, `default_mode`. Backend: explicit, `command`, the definition's
`backend`, `default_backend`, a `claude-*` model, pi.
Timeouts: the request, then `timeout_ms` / `stall_timeout_ms`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from subagent_host.agents.discovery import AgentCatalog, discover
from subagent_host.backends.base import Backend
from subagent_host.planning.check import CheckedSpawn
from subagent_host.planning.items import AgentSources
from subagent_host.settings import ModelProfile, Settings
from tests.planning.conftest import check_request


def definition(directory: Path, name: str, **fields: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = ["---", f"name: {name}", f"description: {name}"]
    lines += [f"{key}: {value}" for key, value in fields.items()]
    (directory / f"{name}.md").write_text("\n".join([*lines, "---", f"Be {name}.", ""]))


@pytest.fixture
def catalog(tmp_path: Path) -> AgentCatalog:
    """`scout` (user, with everything set), `plain` (user, nothing set), `local` (project)."""
    user = tmp_path / "config"
    definition(
        user / "agents",
        "scout",
        model="mock/from-definition",
        effort="high",
        tools="read, grep",
        subagent_mode="task",
    )
    definition(user / "agents", "plain")
    definition(tmp_path / "project" / ".pi" / "agents", "local", effort="low")
    return discover(user, tmp_path / "project")


def check(
    backends: dict[str, Backend],
    tmp_path: Path,
    settings: Settings,
    catalog: AgentCatalog | None = None,
    **request: Any,
) -> CheckedSpawn:
    return check_request(
        backends, tmp_path, AgentSources(settings=settings, catalog=catalog), **request
    )


def child(checked: CheckedSpawn) -> Any:
    assert checked.accepted, checked.diagnostics
    assert checked.plan is not None
    return checked.plan.children[0]


DEFAULTS = Settings(
    default_model="mock/default",
    default_effort="minimal",
    default_tools=("read", "ls"),
    default_mode="task",
    timeout_ms=1234,
    stall_timeout_ms=567,
)


def test_configured_defaults_apply_to_a_plain_prompt(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(backends, tmp_path, DEFAULTS, prompt="hi")
    planned = child(checked)
    assert (planned.model, planned.thinking, planned.tools) == (
        "mock/default",
        "minimal",
        ("read", "ls"),
    )
    assert (planned.timeout_ms, planned.stall_timeout_ms) == (1234, 567)
    assert checked.mode == "task"


def test_the_request_beats_every_default(backends: dict[str, Backend], tmp_path: Path) -> None:
    checked = check(
        backends,
        tmp_path,
        DEFAULTS,
        prompt="hi",
        model="mock/asked",
        thinking="high",
        tools=["grep"],
        mode="background",
        timeoutMs=99,
        stallTimeoutMs=98,
    )
    planned = child(checked)
    assert (planned.model, planned.thinking, planned.tools) == ("mock/asked", "high", ("grep",))
    assert (planned.timeout_ms, planned.stall_timeout_ms, checked.mode) == (99, 98, "background")


def test_a_command_gets_the_timeouts_but_no_agent_defaults(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    planned = child(check(backends, tmp_path, DEFAULTS, command=["true"]))
    assert (planned.backend, planned.model, planned.thinking, planned.tools) == (
        "command",
        None,
        None,
        None,
    )
    assert planned.timeout_ms == 1234


def test_default_backend_chooses_an_items_backend_but_never_a_commands(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    settings = Settings(default_backend="claude")
    assert child(check(backends, tmp_path, settings, prompt="hi")).backend == "claude"
    assert child(check(backends, tmp_path, settings, command=["true"])).backend == "command"
    asked = check(backends, tmp_path, settings, prompt="hi", backend="pi")
    assert child(asked).backend == "pi"


def test_a_definitions_backend_comes_after_an_explicit_one_and_before_every_default(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    user = tmp_path / "config"
    definition(user / "agents", "critic", backend="claude")
    definition(user / "agents", "pinned", backend="pi", model="anthropic/claude-x")
    definition(user / "agents", "elsewhere", backend="gemini")
    found = discover(user, None)
    settings = Settings(default_backend="pi")

    def backend_of(**request: Any) -> str:
        return str(child(check(backends, tmp_path, settings, found, **request)).backend)

    assert backend_of(agent="critic") == "claude"  # before default_backend
    assert backend_of(agent="critic", backend="pi") == "pi"  # after the request's
    assert backend_of(tasks=[{"agent": "critic", "backend": "pi"}]) == "pi"  # an item's
    # Before a claude-* model's rule, with no default configured.
    bare = check(backends, tmp_path, Settings(), found, agent="pinned", model="claude-sonnet")
    assert child(bare).backend == "pi"
    unknown = check(backends, tmp_path, settings, found, agent="elsewhere")
    assert unknown.plan is None
    [error] = [d for d in unknown.diagnostics if d.severity == "error"]
    assert (error.code, error.path) == ("backend-unavailable", "backend")
    assert "backend 'gemini' is not known to this server" in error.message


def test_a_definition_beats_the_defaults_and_a_profile_beats_the_definition(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog
) -> None:
    planned = child(check(backends, tmp_path, DEFAULTS, catalog, agent="scout", prompt="go"))
    assert (planned.model, planned.thinking, planned.tools) == (
        "mock/from-definition",
        "high",
        ("read", "grep"),
    )
    assert planned.instructions == "Be scout."
    assert planned.agent is not None and planned.agent.source == "user"

    profiled = attrs.evolve(DEFAULTS, user_profiles={"scout": ModelProfile(model="mock/profile")})
    planned = child(check(backends, tmp_path, profiled, catalog, agent="scout", prompt="go"))
    assert (planned.model, planned.thinking) == ("mock/profile", "high")

    asked = check(
        backends, tmp_path, profiled, catalog, agent="scout", prompt="go", model="mock/asked"
    )
    assert child(asked).model == "mock/asked"


def test_a_definition_that_sets_nothing_takes_the_defaults(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog
) -> None:
    checked = check(backends, tmp_path, DEFAULTS, catalog, agent="plain", prompt="go")
    planned = child(checked)
    assert (planned.model, planned.thinking, planned.tools) == (
        "mock/default",
        "minimal",
        ("read", "ls"),
    )


def test_profiles_apply_only_to_agents_of_their_own_source(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog
) -> None:
    settings = Settings(
        user_profiles={"local": ModelProfile(effort="xhigh")},
        project_profiles={"scout": ModelProfile(effort="xhigh")},
    )
    local = child(check(backends, tmp_path, settings, catalog, agent="local", prompt="go"))
    scout = child(check(backends, tmp_path, settings, catalog, agent="scout", prompt="go"))
    assert (local.thinking, scout.thinking) == ("low", "high")  # their definitions' own
    settings = Settings(project_profiles={"local": ModelProfile(effort="xhigh")})
    local = child(check(backends, tmp_path, settings, catalog, agent="local", prompt="go"))
    assert local.thinking == "xhigh"


def test_a_single_agents_subagent_mode_beats_the_default_mode(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog
) -> None:
    settings = Settings(default_mode="background")
    assert check(backends, tmp_path, settings, catalog, agent="scout", prompt="go").mode == "task"
    plain = check(backends, tmp_path, settings, catalog, agent="plain", prompt="go")
    assert plain.mode == "background"
    asked = check(
        backends, tmp_path, settings, catalog, agent="scout", prompt="go", mode="background"
    )
    assert asked.mode == "background"


def test_delegation_tools_are_removed_from_the_request_and_the_defaults(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    settings = Settings(default_tools=("read", "subagent_spawn"))
    checked = check(backends, tmp_path, settings, prompt="hi")
    assert child(checked).tools == ("read",)
    assert [(d.code, d.path) for d in checked.diagnostics] == [("tools-removed", "tools")]
    asked = check(backends, tmp_path, Settings(), prompt="hi", tools=["subagent_run", "grep"])
    assert child(asked).tools == ("grep",)


# Both prefixes, any case (tests/agents/test_delegation.py has the names that are kept).
DELEGATING = [
    "subagent_spawn",
    "SubAgent_Status",
    "agent_profiles_subagent_run",
    "AGENT_PROFILES_SUBAGENT_X",
]


@pytest.mark.parametrize("source", ["request", "definition", "default_tools"])
def test_both_delegation_prefixes_are_removed_in_any_case_from_every_source(
    backends: dict[str, Backend], tmp_path: Path, source: str
) -> None:
    tools = ["read", *DELEGATING, "grep"]
    settings, sources = Settings(), None
    request: dict[str, Any] = {"prompt": "hi"}
    if source == "request":
        request["tools"] = tools
    elif source == "default_tools":
        settings = Settings(default_tools=tuple(tools))
    else:
        definition(tmp_path / "config" / "agents", "lister", tools=", ".join(tools))
        sources = discover(tmp_path / "config", tmp_path / "project")
        request["agent"] = "lister"
    checked = check(backends, tmp_path, settings, sources, **request)
    assert child(checked).tools == ("read", "grep")
    [note] = [d for d in checked.diagnostics if d.code == "tools-removed"]
    assert note.severity == "info" and note.path == "tools"
    assert note.message == (
        f"removed {', '.join(DELEGATING)}: a child must not delegate further through these tools"
    )
