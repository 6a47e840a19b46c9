"""An agent child needs a prompt with text in it: `""` or whitespace is refused where it
stands (`empty-prompt` and the field's path); a `command` child's prompt is only its
stdin and may be empty."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagent_host.agents.discovery import discover
from subagent_host.backends.base import Backend
from subagent_host.planning.check import CheckedSpawn
from subagent_host.planning.items import AgentSources
from tests.planning.conftest import check_request


def check(
    backends: dict[str, Backend],
    tmp_path: Path,
    sources: AgentSources | None = None,
    **request: Any,
) -> CheckedSpawn:
    return check_request(backends, tmp_path, sources, **request)


def errors(checked: CheckedSpawn) -> list[tuple[str, str | None]]:
    return [(d.code, d.path) for d in checked.diagnostics if d.severity == "error"]


@pytest.mark.parametrize("prompt", ["", " ", "\n\t  \n", "\u00a0\u2003"])
@pytest.mark.parametrize("backend", ["pi", "claude"])
def test_an_empty_or_whitespace_prompt_of_an_agent_is_refused_at_its_path(
    backends: dict[str, Backend], tmp_path: Path, prompt: str, backend: str
) -> None:
    checked = check(backends, tmp_path, prompt=prompt, backend=backend)
    assert not checked.accepted
    assert errors(checked) == [("empty-prompt", "prompt")]


def test_an_empty_prompt_in_tasks_and_chain_is_named_by_its_item(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    items = [{"prompt": "fine"}, {"prompt": "  "}]
    assert errors(check(backends, tmp_path, tasks=items)) == [("empty-prompt", "tasks[1].prompt")]
    assert errors(check(backends, tmp_path, chain=items)) == [("empty-prompt", "chain[1].prompt")]


def test_an_empty_prompt_in_a_workflow_step_is_named_by_its_step(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    workflow = {
        "name": "w",
        "task": "t",
        "chain": [
            {"prompt": ""},
            {"parallel": [{"prompt": "{previous}"}, {"prompt": " "}]},
            {"forEach": "{previous}", "item": {"prompt": "\n"}},
        ],
    }
    assert errors(check(backends, tmp_path, workflow=workflow)) == [
        ("empty-prompt", "workflow.chain[0].prompt"),
        ("empty-prompt", "workflow.chain[1].parallel[1].prompt"),
        ("empty-prompt", "workflow.chain[2].item.prompt"),
    ]


def test_a_command_childs_prompt_is_its_stdin_and_may_be_empty(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    assert check(backends, tmp_path, command=["cat"], prompt="").accepted
    assert check(backends, tmp_path, tasks=[{"command": ["cat"], "prompt": " "}]).accepted


def test_an_agent_without_a_prompt_takes_its_instructions_and_empty_ones_are_a_missing_prompt(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    agents = tmp_path / "config" / "agents"
    agents.mkdir(parents=True)
    (agents / "full.md").write_text("---\nname: full\ndescription: d\n---\nLook around.\n")
    (agents / "hollow.md").write_text("---\nname: hollow\ndescription: d\n---\n  \n")
    sources = AgentSources(catalog=discover(tmp_path / "config", None))
    full = check(backends, tmp_path, sources, agent="full")
    assert full.accepted and full.plan is not None
    assert full.plan.children[0].prompt == "Look around."
    assert errors(check(backends, tmp_path, sources, agent="hollow")) == [
        ("missing-prompt", "prompt")
    ]
    # A prompt given but empty is refused as such, whatever the definition says.
    assert errors(check(backends, tmp_path, sources, agent="full", prompt=" ")) == [
        ("empty-prompt", "prompt")
    ]
