"""A configured ACP agent's access and approvals, as planning and its receipts say them
(protocol.md §24.4): its tools are its own and known by kind only, so `access` narrower
than full holds only where the server answers its permission requests (`policy`), and
only while the kinds it runs unasked stay within it; the receipts say `host-hard` only
for an effect every kind of which its asking mode asks before."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest

from subagent_host.backends.acp import AcpBackend
from subagent_host.backends.base import Backend
from subagent_host.backends.command import CommandBackend
from subagent_host.planning.check import CheckedSpawn
from subagent_host.planning.egress import declared_egress, has_agent_child
from subagent_host.planning.normalized import normalized_plan
from subagent_host.planning.receipts import receipts
from subagent_host.planning.views import Access
from subagent_host.values.choices import Approvals
from tests.planning.conftest import LIMITS, check_request, to_json

# Named like no built-in backend: nothing of it may come from a table of names.
AGENT: Final = AcpBackend("some-agent", "some-agent", ("--acp",))
READ_ONLY: Final = {"filesystem": "read"}


@pytest.fixture
def acp_backends(tmp_path: Path) -> dict[str, Backend]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "some-agent").write_text("#!/bin/sh\n")
    (bin_dir / "some-agent").chmod(0o755)
    return {"command": CommandBackend(), "some-agent": AGENT}


def checked(
    backends: dict[str, Backend], tmp_path: Path, approvals: str, access: dict[str, Any] | None
) -> CheckedSpawn:
    request: dict[str, Any] = {"backend": "some-agent", "prompt": "hi", "approvals": approvals}
    if access is not None:
        request["access"] = access
    return check_request(backends, tmp_path, **request)


def child_receipt(backends: dict[str, Backend], spawn: CheckedSpawn) -> dict[str, Any]:
    assert spawn.plan is not None, spawn.diagnostics
    access = spawn.plan.access or Access()
    described = to_json(receipts(spawn.plan, backends, access, LIMITS))
    child: dict[str, Any] = described["access"]["children"][0]
    return child


def enforcement(child: dict[str, Any]) -> dict[str, str]:
    return {item["effect"]: item["enforcement"] for item in child["approvals"]["effects"]}


def errors(spawn: CheckedSpawn) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in spawn.diagnostics if d.severity == "error"]


@pytest.mark.parametrize("approvals", ["cli", "client"])
def test_a_narrower_access_is_refused_unless_the_server_answers_from_it(
    acp_backends: dict[str, Backend], tmp_path: Path, approvals: str
) -> None:
    spawn = checked(acp_backends, tmp_path, approvals, READ_ONLY)
    assert not spawn.accepted
    [(code, message)] = errors(spawn)
    assert code == "access-not-enforceable"
    assert message.startswith("the some-agent ACP agent's tools are its own")
    assert 'use approvals "policy"' in message
    # Full access is no narrowing: nothing to enforce.
    assert checked(acp_backends, tmp_path, approvals, None).accepted


def test_under_policy_a_read_only_access_is_taken_and_every_kind_kept(
    acp_backends: dict[str, Backend], tmp_path: Path
) -> None:
    spawn = checked(acp_backends, tmp_path, "policy", {**READ_ONLY, "process": False})
    assert spawn.accepted and spawn.plan is not None, spawn.diagnostics
    [planned] = spawn.plan.children
    # The access the server answers its permission requests from.
    assert planned.access is not None and planned.access.filesystem == "read"
    child = child_receipt(acp_backends, spawn)
    assert child["removedTools"] == [] and not child["restrictable"]
    assert [tool["name"] for tool in child["tools"]] == sorted(
        ["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
    )
    # `other` may do anything and is never counted as asked: nothing is host-hard, and
    # the receipt says which kinds run unasked.
    assert enforcement(child) == {
        "filesystem-read": "best-effort",
        "filesystem-write": "best-effort",
        "network": "best-effort",
        "process": "best-effort",
    }
    how = {item["effect"]: item["how"] for item in child["approvals"]["effects"]}
    assert how["filesystem-write"] == "some-agent uses it through other without always asking"
    assert how["network"] == "some-agent uses it through fetch, other without always asking"
    assert how["filesystem-read"] == (
        "some-agent uses it through other, read, search without always asking"
    )
    # Preflight's plan shows the same kept kinds and no removal.
    [shown] = normalized_plan(spawn.plan, acp_backends, spawn.plan.access).children
    assert shown.removed_tools is None and "execute" in shown.tools


@pytest.mark.parametrize(
    ("access", "unasked"),
    [({"filesystem": "none"}, "read, search"), ({"network": False}, "fetch")],
)
def test_under_policy_an_access_a_kind_run_unasked_exceeds_is_refused(
    acp_backends: dict[str, Backend], tmp_path: Path, access: dict[str, Any], unasked: str
) -> None:
    spawn = checked(acp_backends, tmp_path, "policy", access)
    assert not spawn.accepted
    [(code, message)] = errors(spawn)
    assert code == "access-not-enforceable"
    assert message.startswith(f"the some-agent ACP agent runs its {unasked} tools without asking")


def test_the_kinds_its_asking_mode_asks_before_are_host_hard_when_nothing_else_has_them(
    acp_backends: dict[str, Backend],
) -> None:
    """An effect only asked kinds have is host-hard: the receipt reads the kinds, not a
    table of the agent's name."""
    from subagent_host.planning.approvals import approvals_receipt  # noqa: PLC0415

    kept = {kind: AGENT.tools[kind] for kind in ("edit", "move", "read")}
    receipt = to_json(approvals_receipt(AGENT, Approvals.CLIENT, kept))
    assert {item["effect"]: item["enforcement"] for item in receipt["effects"]} == {
        "filesystem-read": "best-effort",
        "filesystem-write": "host-hard",
    }
    assert receipt["effects"][1]["how"] == (
        "some-agent asks before every use, and a client of the run's session answers (run/permit)"
    )
    assert approvals_receipt(AGENT, Approvals.CLI, kept) is None


def test_an_acp_child_talks_to_a_model_provider(
    acp_backends: dict[str, Backend], tmp_path: Path
) -> None:
    spawn = checked(acp_backends, tmp_path, "cli", None)
    assert spawn.plan is not None and has_agent_child(spawn.plan)
    child = child_receipt(acp_backends, spawn)
    assert child["egress"] == [{"kind": "model-provider", "backend": "some-agent"}]
    assert declared_egress("some-agent") == declared_egress(AGENT.id)
