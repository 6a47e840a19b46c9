"""A resume's `access` override: intersected with the approved access, never wider."""

from __future__ import annotations

from typing import Any, Final

import attrs
import pytest

from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.codex import CodexBackend
from subagent_host.backends.command import CommandBackend
from subagent_host.planning.plan import ChildPlan
from subagent_host.planning.projection import check_overrides, child_of, contract, project
from subagent_host.planning.request import FilesystemAccess
from subagent_host.planning.views import Access, Projection, from_json
from subagent_host.values.json_values import JsonObject
from tests.planning.conftest import to_json

CLAUDE = ChildPlan(
    backend="claude", cwd="/tmp", timeout_ms=60_000, stall_timeout_ms=30_000,
    prompt="look around", tools=("Read", "Bash", "WebFetch"),
    access=Access(filesystem=FilesystemAccess.WRITE, process=True, network=True),
)  # fmt: skip
CODEX = ChildPlan(
    backend="codex", cwd="/tmp", timeout_ms=60_000, stall_timeout_ms=30_000, prompt="x"
)
COMMAND = ChildPlan(
    backend="command", cwd="/tmp", timeout_ms=60_000, stall_timeout_ms=30_000, command=("true",)
)
NARROWED: Final[JsonObject] = {"network": False, "process": False}


def test_an_access_that_narrows_keeps_only_the_tools_it_permits_and_says_what_it_removed() -> None:
    projection = project(CLAUDE, ClaudeBackend())
    assert check_overrides(projection, {"access": NARROWED}) == []
    sealed = contract("r", 0, 2, projection, {"access": NARROWED})
    shown = to_json(sealed)
    assert shown["projection"]["access"] == {
        "filesystem": "write",
        "process": False,
        "network": False,
    }
    assert [tool["name"] for tool in shown["projection"]["tools"]] == ["Read"]
    assert shown["removedTools"] == [
        {"name": "Bash", "effects": ["filesystem-read", "filesystem-write", "network", "process"],
         "exceeds": ["network", "process"]},
        {"name": "WebFetch", "effects": ["network"], "exceeds": ["network"]},
    ]  # fmt: skip
    # The projection as stored is what the digest of the projection covers: unchanged.
    assert sealed.projection_digest == contract("r", 0, 2, projection, {}).projection_digest
    argv = ClaudeBackend().prepare(child_of(sealed.projection).item()).argv
    assert argv[argv.index("--tools") + 1] == "Read"


def test_an_access_equal_to_the_approved_one_narrows_nothing() -> None:
    projection = project(CLAUDE, ClaudeBackend())
    assert check_overrides(projection, {"access": {"filesystem": "write"}}) == []
    sealed = contract("r", 0, 2, projection, {"access": {"filesystem": "write"}})
    assert sealed == contract("r", 0, 2, projection, {})


@pytest.mark.parametrize(
    "access",
    [{"network": True}, {"network": True, "filesystem": "read"}, {"filesystem": "write"}],
)
def test_an_access_that_widens_any_member_is_refused_even_beside_a_narrowing(
    access: dict[str, Any],
) -> None:
    launched = attrs.evolve(CLAUDE, access=Access(filesystem=FilesystemAccess.READ, network=False))
    problems = check_overrides(project(launched, ClaudeBackend()), {"access": access})
    assert problems and all("may only be narrowed on resume" in p for p in problems), problems


def test_a_widening_is_told_with_the_members_as_the_request_spells_them() -> None:
    launched = attrs.evolve(CLAUDE, access=Access(filesystem=FilesystemAccess.READ, network=False))
    stored = from_json(to_json(project(launched, ClaudeBackend())), Projection)  # as read back
    problems = check_overrides(stored, {"access": {"filesystem": "write", "network": True}})
    assert problems == [
        "access.filesystem may only be narrowed on resume ('write' is wider than the "
        "approved 'read')",
        "access.network may only be narrowed on resume (True is wider than the approved False)",
    ]


@pytest.mark.parametrize(
    "access", [{}, [], {"filesystem": "all"}, {"network": "false"}, {"shell": False}, None]
)
def test_an_access_that_is_not_one_is_refused(access: Any) -> None:
    assert check_overrides(project(CLAUDE, ClaudeBackend()), {"access": access})


def test_a_command_cannot_be_narrowed_and_no_child_may_be_left_without_tools() -> None:
    command = project(COMMAND, CommandBackend())
    assert check_overrides(command, {"access": {"network": False}}) == [
        "a command child runs a program with your own permissions: it cannot be narrowed"
    ]
    only_bash = project(attrs.evolve(CLAUDE, tools=("Bash",)), ClaudeBackend())
    assert check_overrides(only_bash, {"access": {"process": False}}) == [
        "the narrowed access removes every tool of this child"
    ]


def test_a_narrowed_codex_child_gets_the_sandbox_of_a_spawn_with_that_access() -> None:
    projection = project(CODEX, CodexBackend())
    sealed = contract("r", 0, 2, projection, {"access": {"filesystem": "read"}})
    argv = CodexBackend().prepare(child_of(sealed.projection).item()).argv
    spawned = (
        CodexBackend()
        .prepare(attrs.evolve(CODEX, access=Access(filesystem=FilesystemAccess.READ)).item())
        .argv
    )
    assert "read-only" in " ".join(argv) and argv == spawned


@pytest.mark.parametrize(
    "overrides",
    [
        {"tools": ["Read"]},
        {"thinking": "low"},
        {"sessionResources": "lean"},
        {"model": "claude-other"},
        {"access": {"network": False}, "tools": ["Read"]},  # one refused refuses them all
    ],
    ids=["tools", "thinking", "sessionResources", "model", "with-access"],
)
def test_an_override_of_anything_but_limits_and_access_is_refused(
    overrides: dict[str, Any],
) -> None:
    refused = [name for name in overrides if name != "access"]
    problems = check_overrides(project(CLAUDE, ClaudeBackend()), overrides)
    assert problems == [
        f"{name} cannot be changed on resume (only timeoutMs, stallTimeoutMs, maxTurns, "
        "maxTokens, maxCostUsd may be lowered, and access narrowed); to change it, launch anew"
        for name in refused
    ]
