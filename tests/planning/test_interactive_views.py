"""An interactive or asking child's stored projection, its resume, and its receipts.

The projection keeps `interactive`, `approvals` and the two timeouts, so a resume starts
the child the way it was launched (its driver's launch, which the launch check compares
with the stored argv); a child without them keeps the projection it always had. With
`approvals` other than `cli`, the receipts say for each effect whether its CLI asks
before every use (`host-hard`) or some tool uses it unasked (`best-effort`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import attrs
import pytest

from subagent_host.backends.base import Backend
from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.codex import CodexBackend
from subagent_host.backends.command import CommandBackend
from subagent_host.planning.plan import ChildPlan, RunPlan, prepared
from subagent_host.planning.projection import check_overrides, child_of, project, seal, unseal
from subagent_host.planning.receipts import receipts
from subagent_host.planning.stored_workflow import workflow_from_record, workflow_record
from subagent_host.planning.views import Access, Projection
from subagent_host.resuming.target import resumed_child
from subagent_host.values import RunKind
from subagent_host.values.choices import Approvals
from tests.planning.conftest import LIMITS, check_request, to_json
from tests.planning.test_session_resources import target

INTERACTIVE = ChildPlan(
    backend="claude",
    cwd="/tmp",
    timeout_ms=60_000,
    stall_timeout_ms=30_000,
    prompt="first",
    interactive=True,
    approvals=Approvals.CLIENT,
    idle_timeout_ms=5_000,
    permission_timeout_ms=7_000,
)
BACKENDS: dict[str, Backend] = {
    "claude": ClaudeBackend(),
    "codex": CodexBackend(),
    "command": CommandBackend(),
}


def test_a_projection_keeps_how_its_child_was_driven_and_a_resume_is_driven_again() -> None:
    backend = BACKENDS["claude"]
    projection = project(INTERACTIVE, backend)
    stored = to_json(projection)
    assert (stored["interactive"], stored["approvals"]) == (True, "client")
    assert stored["limits"]["idleTimeoutMs"] == 5_000
    assert stored["limits"]["permissionTimeoutMs"] == 7_000
    assert unseal(*seal(projection)) == projection
    # What the launch check renders again is the stored argv: the driver's launch.
    assert prepared(child_of(projection), backend).argv == projection.argv_template
    again = resumed_child_of(projection)
    assert again.interactive and again.approvals is Approvals.CLIENT
    assert (again.idle_timeout_ms, again.permission_timeout_ms) == (5_000, 7_000)
    assert again.launch is not None and again.launch.stdin is None  # kept open
    assert again.resume_session == "s1"


def test_a_one_shot_childs_projection_is_what_it_always_was() -> None:
    backend = BACKENDS["claude"]
    one_shot = attrs.evolve(
        INTERACTIVE,
        interactive=False,
        approvals=Approvals.CLI,
        idle_timeout_ms=None,
        permission_timeout_ms=None,
    )
    projection = project(one_shot, backend)
    stored = to_json(projection)
    assert not {"interactive", "approvals"} & set(stored)
    assert set(stored["limits"]) == {"timeoutMs", "stallTimeoutMs"}
    again = resumed_child_of(projection)
    assert (again.interactive, again.approvals) == (False, Approvals.CLI)
    assert again.launch is not None
    assert again.launch.argv == backend.prepare(again.item()).argv


def test_a_resume_may_not_change_the_interactive_timeouts() -> None:
    projection = project(INTERACTIVE, BACKENDS["claude"])
    assert check_overrides(projection, {"idleTimeoutMs": 1}) == [
        "idleTimeoutMs cannot be changed on resume (only timeoutMs, stallTimeoutMs, "
        "maxTurns, maxTokens, maxCostUsd may be lowered, and access narrowed); to change "
        "it, launch anew"
    ]


def resumed_child_of(projection: Projection) -> ChildPlan:
    return resumed_child(target(projection), "more", None, BACKENDS)


def approvals_receipt(child: ChildPlan) -> dict[str, Any] | None:
    plan = RunPlan(kind=RunKind.SINGLE, children=(child,))
    described = to_json(receipts(plan, BACKENDS, Access(), LIMITS))
    entry: dict[str, Any] | None = described["access"]["children"][0].get("approvals")
    return entry


# What claude's whole catalog and codex's networked tier are asked for: each write.
ONLY_WRITES_ASKED: Final = {
    "filesystem-read": "best-effort",
    "filesystem-write": "host-hard",
    "network": "best-effort",
    "process": "best-effort",
}


def enforcement(receipt: dict[str, Any] | None) -> dict[str, str]:
    assert receipt is not None
    return {item["effect"]: item["enforcement"] for item in receipt["effects"]}


def test_claude_asks_before_each_write_but_runs_reads_and_harmless_commands_unasked() -> None:
    policy = attrs.evolve(INTERACTIVE, approvals=Approvals.POLICY, permission_timeout_ms=None)
    receipt = approvals_receipt(policy)
    assert receipt is not None and receipt["approvals"] == "policy"
    # Every tool of the catalog: its web tools are not counted as asked.
    assert enforcement(receipt) == ONLY_WRITES_ASKED
    hard = next(e for e in receipt["effects"] if e["effect"] == "filesystem-write")
    assert (
        hard["how"]
        == "claude asks before every use, and the server answers from the child's access"
    )
    soft = next(e for e in receipt["effects"] if e["effect"] == "network")
    assert soft["how"] == "claude uses it through WebFetch, WebSearch without always asking"
    # Without them, Bash is the one way out, and a command that reaches the network is asked.
    narrow = attrs.evolve(policy, tools=("Read", "Edit", "Write", "Bash"))
    assert enforcement(approvals_receipt(narrow))["network"] == "host-hard"


def test_codex_asks_before_patches_and_commands_its_client_answers() -> None:
    codex = attrs.evolve(INTERACTIVE, backend="codex")
    receipt = approvals_receipt(codex)
    assert receipt is not None and receipt["approvals"] == "client"
    assert enforcement(receipt) == ONLY_WRITES_ASKED
    hard = next(e for e in receipt["effects"] if e["effect"] == "filesystem-write")
    assert hard["how"].endswith("a client of the run's session answers (run/permit)")


@pytest.mark.parametrize("backend", ["claude", "command"])
def test_nobody_is_asked_under_cli_and_the_receipt_says_nothing_of_it(backend: str) -> None:
    one_shot = attrs.evolve(
        INTERACTIVE,
        backend=backend,
        command=("cat",) if backend == "command" else None,
        approvals=Approvals.CLI,
        permission_timeout_ms=None,
    )
    assert approvals_receipt(one_shot) is None


def test_a_receipt_of_a_checked_plan_says_how_its_children_are_asked(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\n")
    (bin_dir / "claude").chmod(0o755)
    checked = check_request(
        BACKENDS,
        tmp_path,
        backend="claude",
        approvals="policy",
        access={"filesystem": "read", "network": False},
        tasks=[{"prompt": "a"}],
    )
    assert checked.accepted and checked.plan is not None
    described = to_json(receipts(checked.plan, BACKENDS, checked.plan.access or Access(), LIMITS))
    child = described["access"]["children"][0]
    # The tools whose writes and network uses Claude Code asks for are kept: the server
    # rejects each such use (host-hard); its web tools, which never ask, are removed.
    assert enforcement(child["approvals"]) == {
        "filesystem-read": "best-effort",
        "filesystem-write": "host-hard",
        "network": "host-hard",
        "process": "best-effort",
    }
    assert {"Bash", "Edit", "Write"} <= {tool["name"] for tool in child["tools"]}
    assert {"WebFetch", "WebSearch"} <= {tool["name"] for tool in child["removedTools"]}
    # Asked by a client, nothing the access does not permit is kept.
    checked = check_request(
        BACKENDS,
        tmp_path,
        backend="claude",
        approvals="client",
        access={"filesystem": "read", "network": False},
        tasks=[{"prompt": "a"}],
    )
    assert checked.plan is not None
    described = to_json(receipts(checked.plan, BACKENDS, checked.plan.access or Access(), LIMITS))
    assert enforcement(described["access"]["children"][0]["approvals"]) == {
        "filesystem-read": "best-effort"
    }


def test_a_workflows_stored_item_template_keeps_how_it_is_driven() -> None:
    """A workflow's later steps are run from its stored definition: an interactive
    template is interactive again, and a one-shot one is recorded as it always was."""
    plain = attrs.evolve(INTERACTIVE, backend="command", command=("cat",), approvals=Approvals.CLI)
    one_shot = attrs.evolve(plain, interactive=False, idle_timeout_ms=None)
    plan = RunPlan(kind=RunKind.WORKFLOW, children=(plain, one_shot))
    record: Any = workflow_record(plan)  # read into as JSON
    templates = record["plan"]["children"]
    assert templates[0]["interactive"] is True and templates[0]["idle_timeout_ms"] == 5_000
    assert not {"interactive", "approvals", "idle_timeout_ms"} & set(templates[1])
    assert workflow_from_record(json.loads(json.dumps(record))).children == plan.children
