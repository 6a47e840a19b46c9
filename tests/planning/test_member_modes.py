"""How a launch is answered when the request names no mode: each member of `tasks` resolves
its own (its agent definition's `subagent_mode`, else `default_mode`, else `background`); a
run whose members differ waits for its `task` members only (protocol.md §8.5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagent_host.agents.discovery import AgentCatalog, discover
from subagent_host.backends.base import Backend
from subagent_host.planning.check import CheckedSpawn, resolve_or_reject
from subagent_host.planning.items import AgentSources
from subagent_host.settings import Settings
from tests.planning.conftest import check_request
from tests.planning.test_launch_defaults import definition


@pytest.fixture
def catalog(tmp_path: Path) -> AgentCatalog:
    """`waited` (task), `loose` (background) and `plain` (no mode of its own)."""
    user = tmp_path / "config"
    definition(user / "agents", "waited", subagent_mode="task")
    definition(user / "agents", "loose", subagent_mode="background")
    definition(user / "agents", "plain")
    return discover(user, None)


def tasks(
    backends: dict[str, Backend],
    tmp_path: Path,
    catalog: AgentCatalog,
    *members: dict[str, Any],
    settings: Settings | None = None,
    **request: Any,
) -> CheckedSpawn:
    sources = AgentSources(settings=settings or Settings(), catalog=catalog)
    items = [{"prompt": "go", **member} for member in members]
    checked = check_request(backends, tmp_path, sources, tasks=items, **request)
    assert checked.accepted, checked.diagnostics
    return checked


def test_members_of_one_mode_answer_as_one_run_in_it(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog
) -> None:
    both = tasks(backends, tmp_path, catalog, {"agent": "waited"}, {"agent": "waited"})
    assert (both.mode, both.background) == ("task", ())
    loose = tasks(backends, tmp_path, catalog, {"agent": "loose"}, {"agent": "plain"})
    assert (loose.mode, loose.background) == ("background", ())
    commands = tasks(backends, tmp_path, catalog, {"command": ["true"]}, {"command": ["true"]})
    assert (commands.mode, commands.background) == ("background", ())


def test_definitions_that_differ_make_a_mixed_run_waiting_for_its_task_members(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog
) -> None:
    checked = tasks(
        backends,
        tmp_path,
        catalog,
        {"agent": "loose"},
        {"agent": "waited"},
        {"agent": "plain"},
        {"command": ["true"]},
    )
    assert (checked.mode, checked.background) == ("task", (0, 2, 3))
    resolved = resolve_or_reject(checked)
    assert (resolved.mode, resolved.background) == ("task", (0, 2, 3))


def test_the_default_mode_applies_to_members_without_a_mode_of_their_own(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog
) -> None:
    settings = Settings(default_mode="task")
    checked = tasks(
        backends,
        tmp_path,
        catalog,
        {"command": ["true"]},
        {"agent": "loose"},
        {"agent": "plain"},
        settings=settings,
    )
    assert (checked.mode, checked.background) == ("task", (1,))


@pytest.mark.parametrize("asked", ["task", "background"])
def test_the_requests_mode_overrides_every_member(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog, asked: str
) -> None:
    checked = tasks(
        backends, tmp_path, catalog, {"agent": "loose"}, {"agent": "waited"}, mode=asked
    )
    assert (checked.mode, checked.background) == (asked, ())


def test_a_chain_answers_as_one_whatever_its_members_definitions_say(
    backends: dict[str, Backend], tmp_path: Path, catalog: AgentCatalog
) -> None:
    sources = AgentSources(settings=Settings(default_mode="task"), catalog=catalog)
    chain = [{"agent": "loose", "prompt": "go"}, {"agent": "waited", "prompt": "{previous}"}]
    checked = check_request(backends, tmp_path, sources, chain=chain)
    assert checked.accepted, checked.diagnostics
    assert (checked.mode, checked.background) == ("task", ())
