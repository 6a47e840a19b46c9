"""Fields named in Python for what they hold, read and written under the protocol's word
(values/wire_names.py): a workflow's `output_name` is `as`, a forEach's `over` is `forEach`."""

from __future__ import annotations

from typing import Any, Final

import attrs
import pytest

from subagent_host.planning.request import ForEachStep, ParallelStep, SpawnItem
from subagent_host.rpc.param_problems import STRUCTURE_ERRORS, param_problems
from subagent_host.rpc.wire import SpawnParams, StepSnapshot, make_converter
from subagent_host.values import ReportedStepKind
from subagent_host.values.choices import StepStatus
from subagent_host.values.copying import shared
from subagent_host.values.steps import StepState

CONVERTER: Final = make_converter()


def spawn(*chain: dict[str, Any]) -> dict[str, Any]:
    return {"workflow": {"name": "w", "task": "t", "chain": list(chain)}}


def test_a_steps_wire_names_are_read_into_its_python_names_and_written_back() -> None:
    params = spawn(
        {"command": ["echo", "[1]"], "as": "list"},
        {"forEach": "{outputs.list}", "item": {"command": ["echo", "{item}"]}, "as": "each"},
        {"parallel": [{"command": ["true"], "as": "one"}], "as": "both", "label": "p"},
    )
    read = CONVERTER.structure(params, SpawnParams)
    assert read.workflow is not None
    item, fan_out, group = read.workflow.chain
    assert isinstance(item, SpawnItem) and item.output_name == "list"
    assert isinstance(fan_out, ForEachStep)
    assert (fan_out.over, fan_out.output_name) == ("{outputs.list}", "each")
    assert isinstance(group, ParallelStep)
    assert (group.output_name, group.parallel[0].output_name) == ("both", "one")
    assert CONVERTER.unstructure(read) == params


def test_a_problem_of_a_renamed_field_is_said_at_its_wire_name() -> None:
    params = spawn(
        {"command": ["true"], "as": 5},
        {"forEach": 7, "item": {"command": ["true"]}},
        {"command": ["true"], "ass": "x"},
    )
    with pytest.raises(STRUCTURE_ERRORS) as caught:
        CONVERTER.structure(params, SpawnParams)
    problems = [(p.path, p.message) for p in param_problems(caught.value)]
    assert problems == [
        ("workflow.chain[0].as", "expected a string, got a number"),
        ("workflow.chain[1].forEach", "expected a string, got a number"),
        ("workflow.chain[2].ass", "unknown field (did you mean as?)"),
    ]


def test_a_step_snapshot_is_its_state_frozen_and_written_with_the_wire_s_keys() -> None:
    state = StepState(
        index=1,
        kind=ReportedStepKind.COMMAND,
        status=StepStatus.RUNNING,
        children=(2, 3),
        label="l",
    )
    state.output_name = "out"
    snapshot = shared(StepSnapshot, state)
    assert isinstance(snapshot, StepState) and attrs.asdict(snapshot) == attrs.asdict(state)
    state.status = StepStatus.COMPLETED  # the state goes on; its snapshot does not
    assert snapshot.status == "running"
    assert CONVERTER.unstructure(snapshot) == {
        "index": 1,
        "kind": "command",
        "status": "running",
        "children": [2, 3],
        "label": "l",
        "as": "out",
    }
    assert CONVERTER.structure(CONVERTER.unstructure(snapshot), StepSnapshot) == snapshot
