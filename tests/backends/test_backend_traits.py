"""What sets one backend apart from another, as each says it on the `Backend` interface:
which tools its CLI asks about and which it keeps under `policy`, whether its catalog
names tools or kinds, whether it configures itself, whether a stop cancels its turn
first, and the protocol of a configured agent. Planning and runs read only these."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from subagent_host.backends.acp import AcpBackend
from subagent_host.backends.base import Backend
from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.codex import CodexBackend
from subagent_host.backends.command import CommandBackend
from subagent_host.backends.pi import PiBackend
from subagent_host.values.choices import Effect, ToolKind

READ: Final = Effect.FILESYSTEM_READ
WRITE: Final = Effect.FILESYSTEM_WRITE
NETWORK: Final = Effect.NETWORK

BACKENDS: Final[dict[str, Backend]] = {
    "command": CommandBackend(),
    "pi": PiBackend(session_dir=Path("/nonexistent/pi-sessions")),
    "claude": ClaudeBackend(),
    "codex": CodexBackend(),
    "qwen": AcpBackend("qwen", "qwen", ("--acp",)),
}

# Per backend: tools_by_kind, configures_itself, cancels_turn_first, protocol.
FLAGS: Final[dict[str, tuple[bool, bool, bool, str | None]]] = {
    "command": (False, False, False, None),
    "pi": (False, False, False, None),
    "claude": (False, False, False, None),
    "codex": (False, False, False, None),
    "qwen": (True, True, True, "acp"),
}


@pytest.mark.parametrize("name", list(BACKENDS))
def test_only_an_acp_agent_names_tools_by_kind_configures_itself_and_cancels_first(
    name: str,
) -> None:
    backend = BACKENDS[name]
    assert (
        backend.tools_by_kind,
        backend.configures_itself,
        backend.cancels_turn_first,
        backend.protocol,
    ) == FLAGS[name]


def test_claude_asks_before_its_writing_tools_and_the_host_answers_them_under_policy() -> None:
    asked = {
        "Bash": frozenset({WRITE, NETWORK}),
        "Edit": frozenset({READ, WRITE}),
        "Write": frozenset({WRITE}),
    }
    assert BACKENDS["claude"].asked_tools == asked
    assert BACKENDS["claude"].policy_kept_tools == asked


def test_codex_asks_before_writing_tiers_but_keeps_none_beyond_access_under_policy() -> None:
    asked = {"workspace-write": frozenset({WRITE}), "workspace-write-network": frozenset({WRITE})}
    assert BACKENDS["codex"].asked_tools == asked
    assert BACKENDS["codex"].policy_kept_tools == {}


@pytest.mark.parametrize("name", ["command", "pi"])
def test_a_backend_without_permission_prompts_asks_about_nothing_and_keeps_nothing(
    name: str,
) -> None:
    assert BACKENDS[name].asked_tools == {}
    assert BACKENDS[name].policy_kept_tools == {}


def test_an_acp_agent_asks_by_kind_and_keeps_its_other_kind_under_policy() -> None:
    backend = BACKENDS["qwen"]
    assert set(backend.asked_tools) == {"edit", "delete", "move", "execute"}
    assert backend.asked_tools["execute"] == frozenset(Effect)
    assert set(backend.policy_kept_tools) == {*backend.asked_tools, ToolKind.OTHER.value}
    assert set(backend.tools) == {kind.value for kind in ToolKind}


@pytest.mark.parametrize("name", list(BACKENDS))
def test_the_tools_said_to_be_asked_or_kept_are_tools_of_its_catalog(name: str) -> None:
    backend = BACKENDS[name]
    for table in (backend.asked_tools, backend.policy_kept_tools):
        for tool, effects in table.items():
            assert tool in backend.tools and effects <= backend.tools[tool], (name, tool)
