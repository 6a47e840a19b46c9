"""The table of interactive drivers: every agent backend has one, started the one way."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagent_host.backends.base import Backend, ItemSpec
from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.codex import CodexBackend
from subagent_host.backends.interactive.base import Approvals, Conversation
from subagent_host.backends.interactive.claude_stream import ClaudeConversation
from subagent_host.backends.interactive.codex_app import CodexAppConversation
from subagent_host.backends.interactive.drivers import DRIVERS
from subagent_host.backends.interactive.pi_rpc import PiRpcConversation
from subagent_host.backends.pi import PiBackend
from subagent_host.values.choices import AGENT_BACKENDS


def backends(tmp_path: Path) -> dict[str, Backend]:
    return {
        "pi": PiBackend(tmp_path / "sessions", executable="/opt/pi"),
        "claude": ClaudeBackend(executable="/opt/claude"),
        "codex": CodexBackend(executable="/opt/codex"),
    }


def item_in(tmp_path: Path) -> ItemSpec:
    return ItemSpec(command=None, prompt="p", cwd=str(tmp_path), env={"K": "v"})


def test_every_agent_backend_has_a_driver_of_its_own_conversation() -> None:
    assert set(DRIVERS) == {*AGENT_BACKENDS, "command"} == {"command", "pi", "claude", "codex"}
    assert DRIVERS["pi"].conversation == PiRpcConversation.for_item
    assert DRIVERS["claude"].conversation == ClaudeConversation.for_item
    assert DRIVERS["codex"].conversation == CodexAppConversation.for_item
    for backend_id, driver in DRIVERS.items():
        assert driver.backend.id == backend_id


@pytest.mark.parametrize("backend_id", sorted(AGENT_BACKENDS))
def test_a_driver_starts_its_cli_with_stdin_open_and_a_fresh_conversation(
    tmp_path: Path, backend_id: str
) -> None:
    backend = backends(tmp_path)[backend_id]
    launch, conversation = DRIVERS[backend_id].start(backend, item_in(tmp_path), Approvals.CLI)
    assert launch.argv[0] == f"/opt/{backend_id}" and launch.stdin is None
    assert (launch.cwd, launch.env["K"]) == (str(tmp_path), "v")
    typed: Conversation = conversation
    assert not typed.turn_running and typed.session_id is None and typed.queued() == []


@pytest.mark.parametrize("backend_id", ["claude", "codex"])
@pytest.mark.parametrize("approvals", [Approvals.CLIENT, Approvals.POLICY])
def test_claude_and_codex_take_every_approvals(
    tmp_path: Path, backend_id: str, approvals: Approvals
) -> None:
    backend = backends(tmp_path)[backend_id]
    launch, _ = DRIVERS[backend_id].start(backend, item_in(tmp_path), approvals)
    assert launch.stdin is None


@pytest.mark.parametrize("approvals", [Approvals.CLIENT, Approvals.POLICY])
def test_pi_refuses_approvals_it_cannot_ask(tmp_path: Path, approvals: Approvals) -> None:
    with pytest.raises(ValueError, match="approvals-unsupported"):
        DRIVERS["pi"].start(backends(tmp_path)["pi"], item_in(tmp_path), approvals)


def test_a_driver_refuses_another_clis_backend(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="the codex driver cannot launch pi"):
        DRIVERS["codex"].start(backends(tmp_path)["pi"], item_in(tmp_path), Approvals.CLI)
