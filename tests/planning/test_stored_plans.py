"""Plans made now match what the server of aae3849 sealed and stored for the same requests
(`tests/fixtures/state_v1/`, see `tests/e2e/test_stored_state.py` for the whole server)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Final

import pytest

from subagent_host.backends.command import CommandBackend
from subagent_host.planning.check import check_spawn, resolve_or_reject
from subagent_host.planning.plan import LaunchPlan
from subagent_host.planning.projection import project, seal
from subagent_host.planning.stored_workflow import workflow_from_record, workflow_record
from subagent_host.planning.views import to_json
from subagent_host.rpc.wire import SpawnParams, make_converter
from tests.planning.conftest import LIMITS

FIXTURE: Final = Path(__file__).resolve().parents[1] / "fixtures" / "state_v1"
EXPECTED: Final[dict[str, Any]] = json.loads((FIXTURE / "expected.json").read_text())
# The launches of `command` children (the agent ones need the fixture's stub CLI on PATH).
COMMAND_LAUNCHES: Final = sorted(
    name for name, launch in EXPECTED["launches"].items() if "runId" in launch
)


def planned(name: str) -> LaunchPlan:
    params = make_converter().structure(EXPECTED["launches"][name]["params"], SpawnParams)
    checked = check_spawn(
        params, backends={"command": CommandBackend()}, limits=LIMITS, depth=0, server_cwd="/"
    )
    return resolve_or_reject(checked).plan


def stored(query: str, *args: object) -> tuple[Any, ...]:
    """One row from the fixture's database, opened read-only (and left unchanged)."""
    uri = f"file:{FIXTURE / 'state' / 'subagent-host.sqlite3'}?immutable=1"
    with sqlite3.connect(uri, uri=True) as db:
        row: tuple[Any, ...] = db.execute(query, args).fetchone()
    db.close()
    return row


@pytest.mark.parametrize("name", COMMAND_LAUNCHES)
def test_a_plan_made_now_has_the_fingerprint_and_shape_sealed_before(name: str) -> None:
    plan = planned(name)
    before = EXPECTED["launches"][name]["preflight"]
    assert plan.fingerprint == before["fingerprint"]
    assert json.dumps(to_json(plan.normalized)) == json.dumps(before["plan"])


def test_a_workflow_is_recorded_as_it_was_recorded_before() -> None:
    run_id = EXPECTED["launches"]["workflow"]["runId"]
    (record,) = stored("SELECT definition FROM workflows WHERE run_id = ?", run_id)
    assert workflow_record(planned("workflow")) == json.loads(record)


def test_a_workflow_recorded_before_reads_back_as_the_plan_made_now() -> None:
    """Its steps are the plan's own `PlanStep`s, each index its place in the record."""
    run_id = EXPECTED["launches"]["workflow"]["runId"]
    (record,) = stored("SELECT definition FROM workflows WHERE run_id = ?", run_id)
    plan = planned("workflow")
    read = workflow_from_record(json.loads(record))
    assert read.workflow == plan.workflow
    assert read.workflow is not None and plan.normalized.workflow is not None
    assert read.workflow.steps == plan.normalized.workflow.steps
    assert [step.index for step in read.workflow.steps] == [0, 1, 2]


@pytest.mark.parametrize("name", ["single", "tasks", "chain"])
def test_each_child_is_projected_and_sealed_byte_for_byte_as_before(name: str) -> None:
    plan = planned(name)
    run_id = EXPECTED["launches"][name]["runId"]
    for index, child in enumerate(plan.children):
        before = stored(
            "SELECT projection, projection_digest FROM children WHERE run_id = ? AND idx = ?",
            run_id,
            index,
        )
        assert seal(project(child, CommandBackend())) == before
