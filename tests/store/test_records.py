"""A run's record as stored (store/records.py): what it keeps, and what it leaves out."""

from __future__ import annotations

from datetime import UTC, datetime

from subagent_host.runs.state import Run, StepState, WorkflowState
from subagent_host.store.records import dumps, run_from_record, run_record
from subagent_host.values import RunKind, StepKind


def test_a_step_running_a_command_is_reported_as_command_and_stored_as_planned() -> None:
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
                StepState(index=0, kind=StepKind.PROMPT, command=True),
                StepState(index=1, kind=StepKind.PROMPT),
            ],
        ),
    )
    assert run.workflow is not None
    assert [step.reported_kind for step in run.workflow.steps] == ["command", "prompt"]
    record = run_record(run)
    assert record["workflow"]["steps"] == [
        {"index": 0, "kind": "prompt"},
        {"index": 1, "kind": "prompt"},
    ]
    run.workflow.steps[0].command = False
    assert dumps(run_record(run)) == dumps(record)  # the flag leaves no trace
    read = run_from_record(record, [])
    assert read.workflow is not None and not read.workflow.steps[0].command
