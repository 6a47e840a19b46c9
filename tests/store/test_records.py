"""A run's record as stored (store/records.py): what it keeps, and what it leaves out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from subagent_host.runs.state import Run, StepState, WorkflowState
from subagent_host.store.records import dumps, run_from_record, run_record
from subagent_host.values import ReportedStepKind, RunKind


def test_a_step_running_a_command_is_of_kind_command_and_stored_as_planned() -> None:
    run = Run(
        run_id="r",
        session_id="s",
        kind=RunKind.WORKFLOW,
        fingerprint="f",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        children=[],
        workflow=WorkflowState(
            name="w",
            steps=[
                StepState(index=0, kind=ReportedStepKind.COMMAND),
                StepState(index=1, kind=ReportedStepKind.PROMPT),
            ],
        ),
    )
    assert run.workflow is not None
    record: dict[str, Any] = run_record(run)
    assert record["workflow"]["steps"] == [
        {"index": 0, "kind": "prompt"},
        {"index": 1, "kind": "prompt"},
    ]
    run.workflow.steps[0].kind = ReportedStepKind.PROMPT
    assert dumps(run_record(run)) == dumps(record)  # the kind `command` leaves no trace
    # Read back as stored: the store's reads mark it `command` again from the workflow's
    # stored definition (tests/e2e/test_stored_state.py).
    read = run_from_record(record, [])
    assert read.workflow is not None and read.workflow.steps[0].kind == "prompt"
