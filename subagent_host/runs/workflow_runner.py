"""Carry a workflow out: steps in order, each step's children made from its item templates.

A step starts only when every earlier step completed. Its templates are filled
then (`{task}`, `{previous}`, `{outputs.NAME}`, and per forEach element
`{item}`, `{index}`), its children are added to the run, and they run at most
`parallelism` at a time (each still waits for a server-wide slot). A step ends
when all its children have ended: completed if they all completed, else with
the first one's status, and then the workflow ends too. A resumed child that
completes its step lets the remaining steps run, reusing every completed
output: the texts are kept per child (capped like `{previous}`), in memory and
in the store.

Each child goes the one way every child goes (`ChildRunner.run`); each step's
status moves through the run state machine's step transitions (`RunStateMachine.transition_step`),
one terminal status per step, as a run's and a child's do.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Final

import attrs

from subagent_host.planning import templates
from subagent_host.planning.executable import identify_children
from subagent_host.planning.plan import (
    ChildPlan,
    RunPlan,
    WorkflowPlan,
    command_steps,
    prepare_child,
)
from subagent_host.planning.projection import project
from subagent_host.planning.views import PlanStep
from subagent_host.runs.child_runner import ChildRunner
from subagent_host.runs.endings import Failed
from subagent_host.runs.live_child import initial_turn
from subagent_host.runs.run_control import RunControl
from subagent_host.runs.services import ChildServices
from subagent_host.runs.settling import Settler
from subagent_host.runs.state import (
    STEP_PENDING,
    STEP_RUNNING,
    STEP_TERMINAL,
    ChildRun,
    Run,
    RunStateMachine,
    RunStatus,
    StepState,
    WorkflowState,
    prompt_head,
)
from subagent_host.runs.workflow_records import WorkflowRecords, write_snapshot
from subagent_host.values import STEP_COMMAND, STEP_FOR_EACH, STEP_PARALLEL, STEP_PROMPT
from subagent_host.values.choices import StepStatus
from subagent_host.values.copying import shared
from subagent_host.values.events import ChildEvent
from subagent_host.values.facts import ErrorInfo, Executable

WORKFLOW_PARALLELISM: Final = 4
MAX_FOR_EACH_ITEMS: Final = 32


def initial_state(plan: RunPlan) -> WorkflowState:
    """Every step pending: the planned step's fields, its kind `command` when it is a
    `prompt` step whose item runs a command."""
    workflow = plan.workflow
    assert workflow is not None
    commands = command_steps(plan)
    return WorkflowState(
        name=workflow.name,
        steps=[
            shared(StepState, step, kind=STEP_COMMAND if step.index in commands else step.kind)
            for step in workflow.steps
        ],
    )


@attrs.define(kw_only=True)
class WorkflowRunner:
    """Carries one workflow run out, and its remaining steps after a resume."""

    run: Run
    plan: RunPlan
    """The workflow plan and its item templates (with their environment values)."""
    children: ChildRunner
    services: ChildServices
    settler: Settler
    records: WorkflowRecords
    texts: dict[int, str] = attrs.Factory(dict)
    """Each completed child's final text, by child index (capped at `previous_cap`)."""
    parallelism: int = WORKFLOW_PARALLELISM
    _failure: ErrorInfo | None = None

    @property
    def state_machine(self) -> RunStateMachine:
        return self.services.state_machine

    @property
    def previous_cap(self) -> int:
        """How much of an earlier output a template's `{previous}` or `{outputs.*}` gets."""
        return self.services.caps.previous_bytes

    @property
    def workflow(self) -> WorkflowPlan:
        assert self.plan.workflow is not None
        return self.plan.workflow

    @property
    def state(self) -> WorkflowState:
        assert self.run.workflow is not None
        return self.run.workflow

    async def carry_out(self, control: RunControl) -> None:
        """Run every step, settle the run, write the snapshot file once more."""
        await self.run_from(0, control)
        await self.write_snapshot()

    async def resume(self, index: int, text: str | None, control: RunControl) -> None:
        """After child `index`'s new attempt (its text if it completed): go on from its step."""
        if text is not None:
            self.keep(index, text)
        await self.resumed(index, control)
        await self.write_snapshot()

    async def run_from(self, start: int, control: RunControl) -> None:
        """Run the steps from `start` until one does not complete; then settle the run."""
        self._failure = None  # a fan-out that failed before may work on a resumed output
        for index in range(start, len(self.workflow.steps)):
            if control.stopping.done():
                break
            completed = await self._run_step(index, control)
            await self.write_snapshot()
            if not completed:
                break
        self.settle(control)

    async def resumed(self, index: int, control: RunControl) -> None:
        """A child's new attempt ended: carry on after its step if the step is now complete."""
        step = self.run.children[index].step
        assert step is not None
        self._failure = None
        if self.state.steps[step].status in STEP_TERMINAL:  # it ended with the run
            self.state_machine.reopen_step(self.run, self.state.steps[step], STEP_RUNNING)
        if self._end_step(step):
            await self.write_snapshot()
            for later in self.state.steps[step + 1 :]:  # a fan-out that failed runs again
                if later.status != STEP_PENDING:
                    self.state_machine.reopen_step(self.run, later, STEP_PENDING)
            await self.run_from(step + 1, control)
            return
        await self.write_snapshot()
        self.settle(control)

    def settle(self, control: RunControl) -> None:
        """The run's one terminal status, from the first step that did not complete."""
        if self._failure is not None:
            self.state_machine.transition(self.run, Failed(self._failure))
            return
        for state in self.state.steps:
            if state.status != StepStatus.COMPLETED:
                children = [self.run.children[i] for i in state.children]
                self.settler.settle_workflow(self.run, control.stop_reason, children, None)
                return
        last = self.state.steps[-1]
        self.settler.settle_workflow(
            self.run,
            control.stop_reason,
            [self.run.children[i] for i in last.children],
            self._step_text(last),
        )

    async def write_snapshot(self) -> None:
        """Rewrite the workflow's `snapshotPath` file (if it has one) with the run as it is."""
        await write_snapshot(self.records, self.run, self.workflow.snapshot_path)

    def keep(self, index: int, text: str) -> None:
        """A completed child's final text, for later templates (and in the store).

        Trailing line breaks are dropped: a command's last newline is no part of
        the value a template or a JSON array of texts carries on.
        """
        self.texts[index] = templates.cap(text.rstrip("\n"), self.previous_cap)
        self.records.text(self.run, index, self.texts[index])

    # --- one step --------------------------------------------------------------------

    async def _run_step(self, index: int, control: RunControl) -> bool:
        step = self.workflow.steps[index]
        state = self.state.steps[index]
        # Before the step starts: a template's program is its children's (argv[0] is no
        # template), and which file that is is recorded with each child's projection.
        programs = await identify_children(
            tuple(self.plan.children[i] for i in step.items),
            self.services.backends,
            self.services.identities,
        )
        self.state_machine.transition_step(self.run, state, STEP_RUNNING)
        values = self._values(index)
        plans = self._expand(index, step, values)
        if plans is None:
            self.state_machine.transition_step(self.run, state, StepStatus.FAILED)
            return False
        # A template without placeholders keeps its planned launch; a filled one is
        # prepared now, once.
        plans = [prepare_child(plan, self.services.backends[plan.backend]) for plan in plans]
        # A forEach step's children are all of its one template.
        of_template = programs if step.kind != STEP_FOR_EACH else programs[:1] * len(plans)
        children = [
            self._new_child(plan, index, program)
            for plan, program in zip(plans, of_template, strict=True)
        ]
        state.children = tuple(child.index for child in children)
        bound = asyncio.Semaphore(self.parallelism)

        async def run_one(child: ChildRun, plan: ChildPlan) -> None:
            async with bound:
                text = await self.children.run(self.run, child.index, plan, control)
            if text is not None:
                self.keep(child.index, text)

        await asyncio.gather(*(run_one(c, p) for c, p in zip(children, plans, strict=True)))
        return self._end_step(index)

    def _new_child(self, plan: ChildPlan, step: int, program: Executable | None) -> ChildRun:
        """A step's new child: queued, its projection recorded, its env remembered."""
        run = self.run
        child = ChildRun(
            index=len(run.children),
            backend=plan.backend,
            label=plan.label,
            step=step,
            prompt_head=prompt_head(plan.prompt),
            turn=initial_turn(plan),
        )
        run.children.append(child)
        self.children.remember_env(run, child.index, plan.env)
        self.records.child_added(
            run, child.index, project(plan, self.services.backends[plan.backend], program)
        )
        self.state_machine.emit(run, ChildEvent(index=child.index, status=child.status))
        return child

    def _end_step(self, index: int) -> bool:
        """End the step with its children's outcome; True when it completed."""
        state = self.state.steps[index]
        unfinished = [
            self.run.children[i]
            for i in state.children
            if self.run.children[i].status is not RunStatus.COMPLETED
        ]
        ended = unfinished[0].status if unfinished else RunStatus.COMPLETED
        self.state_machine.transition_step(self.run, state, StepStatus(ended))
        return not unfinished

    def _expand(
        self, index: int, step: PlanStep, values: Mapping[str, str]
    ) -> list[ChildPlan] | None:
        """The step's children, templates filled; None (and the failure noted) if it cannot."""
        templates_ = [self.plan.children[i] for i in step.items]
        if step.kind != STEP_FOR_EACH:
            return [_filled(child, values) for child in templates_]
        assert step.over is not None
        try:
            elements = templates.json_array(templates.render(step.over, values))
        except templates.NotAnArray as exc:
            self._failure = ErrorInfo(
                "foreach-not-array",
                f"step {index}: forEach needs a JSON array, but {exc}",
                {"step": index},
            )
            return None
        if len(elements) > MAX_FOR_EACH_ITEMS:
            self._failure = ErrorInfo(
                "foreach-too-long",
                f"step {index}: forEach yielded {len(elements)} elements; "
                f"at most {MAX_FOR_EACH_ITEMS} are run",
                {"step": index, "elements": len(elements)},
            )
            return None
        return [
            _filled(
                templates_[0],
                {
                    **values,
                    "item": templates.cap(templates.item_text(element), self.previous_cap),
                    "index": str(position),
                },
            )
            for position, element in enumerate(elements)
        ]

    # --- what templates see ----------------------------------------------------------

    def _values(self, index: int) -> dict[str, str]:
        values = {"task": self.workflow.task}
        if index > 0:
            values["previous"] = templates.cap(
                self._step_text(self.state.steps[index - 1]) or "", self.previous_cap
            )
        for state in self.state.steps[:index]:
            step = self.workflow.steps[state.index]
            if state.output_name is not None:
                values[f"outputs.{state.output_name}"] = templates.cap(
                    self._step_text(state) or "", self.previous_cap
                )
            if step.kind == STEP_PARALLEL:  # a parallel item's own `as` names its text
                for child_index, template in zip(state.children, step.items, strict=True):
                    name = self.plan.children[template].output_name
                    if name is not None:
                        values[f"outputs.{name}"] = self.texts.get(child_index, "")
        return values

    def _step_text(self, state: StepState) -> str | None:
        """A prompt step's child's text; a parallel or forEach step's texts as a JSON array."""
        if state.status == STEP_PENDING:
            return None
        texts = [self.texts.get(i, "") for i in state.children]
        if self.workflow.steps[state.index].kind == STEP_PROMPT:  # a `command` step's too
            return texts[0] if texts else ""
        return json.dumps(texts, ensure_ascii=False)


def _filled(child: ChildPlan, values: Mapping[str, str]) -> ChildPlan:
    def fill(text: str | None) -> str | None:
        return templates.render(text, values) if text is not None else None

    command = tuple(templates.render(a, values) for a in child.command) if child.command else None
    filled = attrs.evolve(
        child, prompt=fill(child.prompt), label=fill(child.label), command=command
    )
    # A template that held no placeholder keeps its planned launch (a copy has none).
    return child if filled == child else filled
