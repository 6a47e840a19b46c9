"""Launch checks for agent items: backend choice, the program on the child's PATH,
tools and thinking each backend knows, and access narrowing what a child gets."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from subagent_host.backends.base import Backend
from subagent_host.planning.check import CheckedSpawn, check_spawn
from subagent_host.rpc.wire import AccessRequest, SpawnParams
from tests.planning.conftest import CONVERTER, LIMITS


def check(backends: dict[str, Backend], tmp_path: Path, **fields: object) -> CheckedSpawn:
    env = {"PATH": str(tmp_path / "bin")}
    params = SpawnParams(env=env, **fields)  # type: ignore[arg-type]
    return check_spawn(params, backends=backends, limits=LIMITS, depth=0, server_cwd=str(tmp_path))


def codes(checked: CheckedSpawn) -> set[str]:
    return {d.code for d in checked.diagnostics if d.severity == "error"}


@pytest.mark.parametrize(
    ("fields", "backend"),
    [
        ({"prompt": "hi"}, "pi"),
        ({"prompt": "hi", "model": "claude-sonnet"}, "claude"),
        ({"prompt": "hi", "model": "anthropic/claude-sonnet"}, "pi"),
        ({"prompt": "hi", "model": "claude-sonnet", "backend": "pi"}, "pi"),
        ({"command": ("true",)}, "command"),
    ],
)
def test_the_backend_is_explicit_else_chosen_by_command_and_model(
    backends: dict[str, Backend], tmp_path: Path, fields: dict[str, object], backend: str
) -> None:
    checked = check(backends, tmp_path, **fields)
    assert checked.accepted and checked.plan is not None
    assert checked.plan.children[0].backend == backend


def test_an_agent_needs_its_program_on_the_childs_path(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    params = SpawnParams(prompt="hi", env={"PATH": str(tmp_path / "nowhere")})
    checked = check_spawn(
        params, backends=backends, limits=LIMITS, depth=0, server_cwd=str(tmp_path)
    )
    assert codes(checked) == {"backend-unavailable"}


def test_unknown_tools_bad_thinking_and_a_missing_prompt_are_diagnostics(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    assert codes(check(backends, tmp_path, prompt="hi", tools=("read", "teleport"))) == {
        "unknown-tool"
    }
    assert codes(check(backends, tmp_path, prompt="hi", thinking="ultra")) == {"invalid-thinking"}
    assert codes(check(backends, tmp_path, backend="pi", command=("x",))) == {
        "not-honoured",  # pi takes a prompt, not a command
        "missing-prompt",
    }
    assert codes(check(backends, tmp_path, command=("true",), thinking="high")) == {"not-honoured"}


def test_access_narrows_the_tools_a_child_is_started_with(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends, tmp_path, prompt="hi", tools=("read", "bash", "write"),
        access=AccessRequest(filesystem="read", process=False),
    )  # fmt: skip
    assert checked.accepted and checked.plan is not None
    assert checked.plan.children[0].tools == ("read",)
    assert "tools-removed" in {d.code for d in checked.diagnostics}


def test_a_server_allowing_one_item_says_it_takes_1_item(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    params = CONVERTER.structure(
        {"tasks": [{"command": ["true"]}, {"command": ["true"]}]}, SpawnParams
    )
    checked = check_spawn(
        params,
        backends=backends,
        limits=attrs.evolve(LIMITS, max_parallel=1),
        depth=0,
        server_cwd=str(tmp_path),
    )
    assert [d.message for d in checked.diagnostics if d.severity == "error"] == [
        "tasks takes 1 item, not 2"
    ]
