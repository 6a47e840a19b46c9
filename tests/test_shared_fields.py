"""Values made from another by the fields their classes share (`values/copying.py`).

`shared` copies by name, which mypy cannot check: this test does, for every pair it
is used on, that each copied field is declared with the same type on both sides."""

from __future__ import annotations

import typing
from typing import Final

import attrs
import pytest

from subagent_host.agents.definitions import AgentDefinition
from subagent_host.backends.base import ItemSpec
from subagent_host.config import ServerConfig
from subagent_host.planning.plan import ChildPlan, ServerLimits, WorkflowPlan
from subagent_host.planning.request import ForEachStep, ParallelStep
from subagent_host.planning.views import (
    ChildLimits,
    PlanChild,
    PlannedPlacement,
    PlanStep,
    PlanWorkflow,
    Projection,
)
from subagent_host.rpc.wire import AgentInfo, ChildSnapshot, Limits, RunOutcome, StepSnapshot
from subagent_host.runs.state import ChildRun, Run, StepState
from subagent_host.terminal.runs import RunLine
from subagent_host.values.copying import shared
from subagent_host.values.placement import Placement

# A plan's `interactive` and `approvals`, which its views show only when set (`driving`).
DRIVING: Final = ("interactive", "approvals")
# (source, made, the fields of the same name the call gives itself)
PAIRS: Final[tuple[tuple[type, type, frozenset[str]], ...]] = (
    (ServerConfig, Limits, frozenset()),
    (ServerConfig, ServerLimits, frozenset()),
    (ChildPlan, ChildLimits, frozenset()),
    (ChildPlan, ItemSpec, frozenset({"prompt", "session_resources"})),
    (ChildPlan, Projection, frozenset({"tools", "redact", "placement", "limits", *DRIVING})),
    (Projection, ChildPlan, frozenset({"tools", "redact", "placement", *DRIVING})),
    (ChildLimits, ChildPlan, frozenset()),
    (ChildPlan, PlanChild, frozenset({"tools", "redact", "placement", "removed_tools", *DRIVING})),
    (Placement, PlannedPlacement, frozenset()),
    (WorkflowPlan, PlanWorkflow, frozenset()),
    (ParallelStep, PlanStep, frozenset()),
    (ForEachStep, PlanStep, frozenset({"over"})),
    (PlanStep, StepState, frozenset({"kind"})),
    (StepState, StepSnapshot, frozenset()),
    (PlannedPlacement, Placement, frozenset()),
    (Run, RunOutcome, frozenset()),
    (ChildRun, RunOutcome, frozenset()),
    (ChildRun, ChildSnapshot, frozenset({"signal"})),
    (AgentDefinition, AgentInfo, frozenset({"model", "effort", "tools", "mode"})),
    (Run, RunLine, frozenset({"kind", "status", "children"})),
)


@pytest.mark.parametrize(
    ("source", "made", "given"), PAIRS, ids=[f"{s.__name__}->{m.__name__}" for s, m, _ in PAIRS]
)
def test_each_field_copied_by_name_has_the_same_type_on_both_sides(
    source: type, made: type, given: frozenset[str]
) -> None:
    source_types = typing.get_type_hints(source)
    made_types = typing.get_type_hints(made)
    copied = [
        field.name
        for field in attrs.fields(made)
        if field.init and field.name in source_types and field.name not in given
    ]
    assert copied, "the pair shares no field: no need to copy"
    assert {name: source_types[name] for name in copied} == {
        name: made_types[name] for name in copied
    }


def test_shared_copies_the_common_fields_and_takes_the_given_ones() -> None:
    placed = PlannedPlacement(resources={"gpu": 1.0}, node_id="n", labels=None)
    assert shared(Placement, placed) == Placement(resources={"gpu": 1.0}, node_id="n")
    assert shared(Placement, placed, node_id="m").node_id == "m"
    child = ChildPlan(backend="command", cwd="/", timeout_ms=5, stall_timeout_ms=3, max_turns=2)
    assert shared(ChildLimits, child) == ChildLimits(timeout_ms=5, stall_timeout_ms=3, max_turns=2)
