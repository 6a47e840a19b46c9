"""Access means what it says: each CLI's tool catalog declares every effect a tool can
have, narrowing `access` removes the tools that exceed it, and the receipt of the plan
that runs says what was removed and why, never claiming less than the child can do."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from subagent_host.backends.base import EFFECTS, Backend
from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.codex import TOOLS as CODEX_TIERS
from subagent_host.backends.codex import CodexBackend, sandbox_tier
from subagent_host.backends.pi import PiBackend
from subagent_host.planning.access import permitted
from subagent_host.planning.check import CheckedSpawn, check_spawn
from subagent_host.planning.normalized import normalized_plan
from subagent_host.planning.receipts import receipts
from subagent_host.planning.request import FilesystemAccess
from subagent_host.planning.views import Access
from subagent_host.rpc.wire import AccessRequest, SpawnParams
from tests.planning.conftest import LIMITS, to_json

EVERYTHING = set(EFFECTS)
READ = {"filesystem-read"}


@pytest.fixture
def all_backends(backends: dict[str, Backend], tmp_path: Path) -> dict[str, Backend]:
    (tmp_path / "bin" / "codex").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "codex").chmod(0o755)
    return {**backends, "codex": CodexBackend()}


def check(backends: dict[str, Backend], tmp_path: Path, **fields: object) -> CheckedSpawn:
    params = SpawnParams(prompt="hi", env={"PATH": str(tmp_path / "bin")}, **fields)  # type: ignore[arg-type]
    return check_spawn(params, backends=backends, limits=LIMITS, depth=0, server_cwd=str(tmp_path))


def receipt(backends: dict[str, Backend], checked: CheckedSpawn) -> dict[str, Any]:
    assert checked.accepted and checked.plan is not None, checked.diagnostics
    access = checked.plan.access or Access()
    child: dict[str, Any] = to_json(receipts(checked.plan, backends, access, LIMITS))["access"][
        "children"
    ][0]
    return child


def test_pis_shell_and_its_downloading_search_tools_carry_every_effect() -> None:
    tools = PiBackend(session_dir=Path("/nowhere")).tools
    assert tools["bash"] == tools["grep"] == tools["find"] == EVERYTHING
    assert tools["read"] == tools["ls"] == READ
    assert tools["edit"] == {"filesystem-read", "filesystem-write"}
    assert tools["write"] == {"filesystem-write"}


def test_claudes_bash_carries_every_effect_and_its_web_tools_the_network() -> None:
    tools = ClaudeBackend().tools
    assert tools["Bash"] == EVERYTHING
    assert tools["Read"] == tools["Grep"] == tools["Glob"] == READ
    assert tools["Edit"] == {"filesystem-read", "filesystem-write"}
    assert tools["Write"] == {"filesystem-write"}
    assert tools["WebFetch"] == tools["WebSearch"] == {"network"}


def test_codex_tiers_are_its_sandboxes_and_each_runs_a_process_that_reads() -> None:
    backend = CodexBackend()
    assert backend.tools_required
    assert backend.tools["read-only"] == {"process", "filesystem-read"}
    assert backend.tools["workspace-write"] == {"process", "filesystem-read", "filesystem-write"}
    assert backend.tools["workspace-write-network"] == EVERYTHING


@pytest.mark.parametrize(
    ("backend", "shell", "left"),
    [("pi", "bash", ["read"]), ("claude", "Bash", ["Read"])],
)
@pytest.mark.parametrize(
    "access",
    [
        AccessRequest(filesystem="read"),
        AccessRequest(network=False),
        AccessRequest(process=False),
    ],
)
def test_narrowed_access_removes_the_shell_and_the_receipt_says_why(
    all_backends: dict[str, Backend],
    tmp_path: Path,
    backend: str,
    shell: str,
    left: list[str],
    access: AccessRequest,
) -> None:
    checked = check(all_backends, tmp_path, backend=backend, tools=(shell, left[0]), access=access)
    assert checked.plan is not None and list(checked.plan.children[0].tools or ()) == left
    child = receipt(all_backends, checked)
    assert [tool["name"] for tool in child["tools"]] == left
    assert child["effects"] == ["filesystem-read"]
    narrowed = Access(
        filesystem=FilesystemAccess(access.filesystem or "write"),
        process=access.process is not False,
        network=access.network is not False,
    )
    removed = child["removedTools"]
    assert removed == [
        {
            "name": shell,
            "effects": sorted(EVERYTHING),
            "exceeds": sorted(EVERYTHING - permitted(narrowed)),
        }
    ]
    plan = to_json(normalized_plan(checked.plan, all_backends, narrowed))
    assert plan["children"][0]["removedTools"] == [shell]
    note = next(d for d in checked.diagnostics if d.code == "tools-removed")
    exceeded = ", ".join(sorted(EVERYTHING - permitted(narrowed)))
    assert f"{shell} ({exceeded})" in note.message


def test_a_pi_child_left_without_tools_by_read_access_keeps_only_readers(
    all_backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(all_backends, tmp_path, backend="pi", access=AccessRequest(filesystem="read"))
    child = receipt(all_backends, checked)
    # pi's default set is read, bash, edit, write: only read is within read access.
    assert [tool["name"] for tool in child["tools"]] == ["read"]
    assert [tool["name"] for tool in child["removedTools"]] == ["bash", "edit", "write"]
    assert checked.plan is not None
    launch = all_backends["pi"].prepare(checked.plan.children[0].item())
    assert launch.argv[launch.argv.index("--tools") + 1] == "read"


def test_codex_with_an_empty_tool_list_is_refused_rather_than_claimed_toolless(
    all_backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(all_backends, tmp_path, backend="codex", tools=())
    assert not checked.accepted
    refused = [d for d in checked.diagnostics if d.severity == "error"]
    assert [(d.code, d.path) for d in refused] == [("tools-required", "tools")]
    assert "shell" in refused[0].message and "read-only" in refused[0].message
    # pi and claude honour an empty list: they are started with no tool at all.
    assert check(all_backends, tmp_path, backend="claude", tools=()).accepted


ACCESSES = [
    AccessRequest(filesystem=filesystem, process=process, network=network)
    for filesystem, process, network in itertools.product(
        ("none", "read", "write"), (True, False), (True, False)
    )
]


@pytest.mark.parametrize("access", ACCESSES, ids=str)
@pytest.mark.parametrize(
    "tools", [None, ("read-only",), ("workspace-write",), ("read-only", "workspace-write-network")]
)
def test_every_codex_access_is_refused_or_receipted_as_exactly_the_sandbox_it_runs(
    all_backends: dict[str, Backend],
    tmp_path: Path,
    access: AccessRequest,
    tools: tuple[str, ...] | None,
) -> None:
    checked = check(all_backends, tmp_path, backend="codex", tools=tools, access=access)
    if not checked.accepted:
        assert {d.code for d in checked.diagnostics if d.severity == "error"} == {"no-tools-left"}
        # Refused only when no requested tier fits: codex always reads and runs its shell.
        allowed = permitted(
            Access(
                FilesystemAccess(access.filesystem or "write"),
                access.process is not False,
                access.network is not False,
            )
        )
        requested = tools if tools is not None else tuple(CODEX_TIERS)
        assert all(not CODEX_TIERS[tier] <= allowed for tier in requested)
        return
    assert checked.plan is not None
    child = receipt(all_backends, checked)
    tier = sandbox_tier(checked.plan.children[0].item())
    assert set(child["effects"]) == CODEX_TIERS[tier]
    argv = all_backends["codex"].prepare(checked.plan.children[0].item()).argv
    assert argv[argv.index("--sandbox") + 1] == tier.removesuffix("-network")
