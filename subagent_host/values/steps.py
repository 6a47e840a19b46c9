"""A workflow step's state: how far it got, as the run state machine keeps it and a
snapshot shows it.

A step has three types, one per stage: as requested (`planning/request.py`'s
`WorkflowStep`), as planned (`planning/views.py`'s `PlanStep`) and as it runs
(`StepState`, here). The state is what the wire shows of a step: the wire's
`StepSnapshot` is this class, frozen, and declares no field of its own. It lives
here, below both, because the wire may not import `runs/` and the run state
machine may not import the wire. Imports nothing of ours but `values`.
"""

from __future__ import annotations

import attrs

from subagent_host.values import ReportedStepKind
from subagent_host.values.choices import StepStatus
from subagent_host.values.wire_names import WIRE_NAME


@attrs.define
class StepState:
    """How far one workflow step got: `pending` until it starts, then its children's outcome.

    Its status changes only through the run state machine (`runs/state.py`); a
    record keeps it (`store/records.py`) with the planned kind, `prompt`, for a
    `command` step, as records always have."""

    index: int
    """The step's position in `workflow.chain`, from 0."""
    kind: ReportedStepKind
    """`prompt` (one agent item), `command` (one command item), `parallel` or `forEach`."""
    status: StepStatus = StepStatus.PENDING
    """`pending` (not started), `running`, or the status it ended with."""
    children: tuple[int, ...] = ()
    """The indices of its children in the run's `children`."""
    label: str | None = None
    """The step's label, when it has one."""
    output_name: str | None = attrs.field(default=None, metadata={WIRE_NAME: "as"})
    """Wire name `as`: the name later steps know its text by, when it has one."""
