"""A child's launch is prepared once, when it is planned: the fingerprint, the receipts,
the projection and the start all use that one rendering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from subagent_host.backends.base import ItemSpec, Launch
from subagent_host.backends.command import CommandBackend
from subagent_host.planning.check import check_spawn, resolve_or_reject
from subagent_host.planning.plan import LaunchPlan, prepared
from subagent_host.planning.projection import project
from subagent_host.planning.receipts import receipts
from subagent_host.planning.views import Access
from subagent_host.rpc.wire import SpawnParams, make_converter
from subagent_host.runs.state import Run, RunStatus
from tests.backends.conftest import processes_with_marker
from tests.planning.conftest import LIMITS
from tests.runs.test_orchestrator import Harness


class CountingBackend(CommandBackend):
    """The command backend, noting every launch it prepares."""

    def __init__(self) -> None:
        self.prompts: list[str | None] = []
        self.argvs: list[tuple[str, ...]] = []

    def prepare(self, item: ItemSpec) -> Launch:
        launch = super().prepare(item)
        self.prompts.append(item.prompt)
        self.argvs.append(launch.argv)
        return launch


def planned(harness: Harness, tmp_path: Path, **request: Any) -> LaunchPlan:
    params = make_converter().structure(request, SpawnParams)
    checked = check_spawn(
        params, backends=harness.backends, limits=LIMITS, depth=0, server_cwd=str(tmp_path)
    )
    return resolve_or_reject(checked).plan


async def launched(harness: Harness, plan: LaunchPlan) -> Run:
    """Run the plan to its end, and prove none of its processes is left."""
    run = harness.orchestrator.launch(plan, "s1")
    try:
        return await harness.finish(run)
    finally:
        await harness.orchestrator.shutdown("test over")
        left = [p.pid for p in processes_with_marker(run.run_id) if p.status() != "zombie"]
        assert left == [], f"processes left behind: {left}"


async def test_a_spawned_child_is_prepared_once_from_its_request_to_its_start(
    tmp_path: Path,
) -> None:
    backend = CountingBackend()
    harness = Harness(backend=backend)
    plan = planned(harness, tmp_path, command=["cat"], prompt="in")
    # What preflight shows and a run records: views of the plan, not new renderings.
    assert plan.normalized.children[0].argv == ("cat",)
    receipts(plan, harness.backends, Access(), LIMITS)
    assert project(plan.children[0], backend).argv_template == ("cat",)
    run = await launched(harness, plan)
    assert run.status is RunStatus.COMPLETED and run.fingerprint == plan.fingerprint
    assert run.output is not None and run.output.text == "in"
    assert backend.prompts == ["in"]


async def test_a_chain_child_is_prepared_again_only_when_previous_filled_its_prompt(
    tmp_path: Path,
) -> None:
    backend = CountingBackend()
    harness = Harness(backend=backend)
    chain = [
        {"command": ["printf", "a"]},
        {"command": ["cat"], "prompt": "got {previous}"},
        {"command": ["cat"], "prompt": "plain"},
    ]
    run = await launched(harness, planned(harness, tmp_path, chain=chain))
    assert run.status is RunStatus.COMPLETED
    assert backend.prompts == [None, "got {previous}", "plain", "got a"]


def test_a_copy_of_a_prepared_child_is_unprepared_so_its_launch_is_never_stale(
    tmp_path: Path,
) -> None:
    harness = Harness()
    child = planned(harness, tmp_path, command=["echo", "{previous}"]).children[0]
    assert child.launch is not None and child.launch.argv == ("echo", "{previous}")
    filled = attrs.evolve(child, command=("echo", "done"))
    assert filled.launch is None
    assert prepared(filled, harness.backends["command"]).argv == ("echo", "done")


async def test_a_workflow_item_is_prepared_again_only_when_its_step_filled_a_placeholder(
    tmp_path: Path,
) -> None:
    backend = CountingBackend()
    harness = Harness(backend=backend)
    workflow = {
        "name": "w",
        "task": "t",
        "chain": [{"command": ["printf", "x"]}, {"command": ["echo", "{previous}"]}],
    }
    run = await launched(harness, planned(harness, tmp_path, workflow=workflow))
    assert run.status is RunStatus.COMPLETED
    assert run.output is not None and run.output.text == "x"
    # Both templates when planned; at their steps, only the filled one again.
    assert backend.argvs == [("printf", "x"), ("echo", "{previous}"), ("echo", "x")]
