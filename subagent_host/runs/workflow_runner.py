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
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Mapping, Sequence
from typing import Final, Protocol

import attrs

from subagent_host.runs import templates
from subagent_host.runs.plans import (
    STEP_FOR_EACH,
    STEP_PARALLEL,
    STEP_PROMPT,
    ChildPlan,
    RunPlan,
    StepPlan,
    WorkflowPlan,
)
from subagent_host.runs.state import (
    STEP_PENDING,
    STEP_RUNNING,
    ChildRun,
    Run,
    RunStatus,
    StepState,
    WorkflowState,
)
from subagent_host.values.facts import ErrorInfo

WORKFLOW_PARALLELISM: Final = 4
MAX_FOR_EACH_ITEMS: Final = 32


class Control(Protocol):
    """What the runner needs of a run's stop control."""

    @property
    def stopping(self) -> asyncio.Future[None]: ...


class WorkflowHost(Protocol):
    """What the run manager does for a workflow: add, run and settle children."""

    def new_child(self, run: Run, plan: ChildPlan, step: int) -> ChildRun: ...

    def run_child(
        self, run: Run, index: int, plan: ChildPlan, control: Control
    ) -> Awaitable[str | None]: ...

    def keep_text(self, run: Run, index: int, text: str) -> None: ...

    def step_ended(self, run: Run) -> Awaitable[None]: ...

    def settle(
        self, run: Run, control: Control, children: Sequence[ChildRun], last_text: str | None
    ) -> None: ...

    def fail(self, run: Run, error: ErrorInfo) -> None: ...


def initial_state(workflow: WorkflowPlan) -> WorkflowState:
    return WorkflowState(
        name=workflow.name,
        steps=[
            StepState(index=i, kind=step.kind, label=step.label, output_name=step.output_name)
            for i, step in enumerate(workflow.steps)
        ],
    )


@attrs.define
class WorkflowRunner:
    run: Run
    plan: RunPlan
    """The workflow plan and its item templates (with their environment values)."""
    host: WorkflowHost
    previous_cap: int
    texts: dict[int, str] = attrs.Factory(dict)
    """Each completed child's final text, by child index (capped at `previous_cap`)."""
    parallelism: int = WORKFLOW_PARALLELISM
    _failure: ErrorInfo | None = None

    @property
    def workflow(self) -> WorkflowPlan:
        assert self.plan.workflow is not None
        return self.plan.workflow

    @property
    def state(self) -> WorkflowState:
        assert self.run.workflow is not None
        return self.run.workflow

    async def run_from(self, start: int, control: Control) -> None:
        """Run the steps from `start` until one does not complete; then settle the run."""
        self._failure = None  # a fan-out that failed before may work on a resumed output
        for index in range(start, len(self.workflow.steps)):
            if control.stopping.done():
                break
            completed = await self._run_step(index, control)
            await self.host.step_ended(self.run)
            if not completed:
                break
        self.settle(control)

    async def resumed(self, index: int, control: Control) -> None:
        """A child's new attempt ended: carry on after its step if the step is now complete."""
        step = self.run.children[index].step
        assert step is not None
        self._failure = None
        if self._end_step(step):
            await self.host.step_ended(self.run)
            await self.run_from(step + 1, control)
            return
        await self.host.step_ended(self.run)
        self.settle(control)

    def settle(self, control: Control) -> None:
        """The run's one terminal status, from the first step that did not complete."""
        if self._failure is not None:
            self.host.fail(self.run, self._failure)
            return
        for state in self.state.steps:
            if state.status != RunStatus.COMPLETED:
                children = [self.run.children[i] for i in state.children]
                self.host.settle(self.run, control, children, None)
                return
        last = self.state.steps[-1]
        self.host.settle(
            self.run,
            control,
            [self.run.children[i] for i in last.children],
            self._step_text(last),
        )

    def keep(self, index: int, text: str) -> None:
        """A completed child's final text, for later templates (and in the store).

        Trailing line breaks are dropped: a command's last newline is no part of
        the value a template or a JSON array of texts carries on.
        """
        self.texts[index] = templates.cap(text.rstrip("\n"), self.previous_cap)
        self.host.keep_text(self.run, index, self.texts[index])

    # --- one step --------------------------------------------------------------------

    async def _run_step(self, index: int, control: Control) -> bool:
        step = self.workflow.steps[index]
        state = self.state.steps[index]
        state.status = STEP_RUNNING
        values = self._values(index)
        plans = self._expand(index, step, values)
        if plans is None:
            state.status = str(RunStatus.FAILED)
            return False
        children = [self.host.new_child(self.run, plan, index) for plan in plans]
        state.children = [child.index for child in children]
        bound = asyncio.Semaphore(self.parallelism)

        async def run_one(child: ChildRun, plan: ChildPlan) -> None:
            async with bound:
                text = await self.host.run_child(self.run, child.index, plan, control)
            if text is not None:
                self.keep(child.index, text)

        await asyncio.gather(*(run_one(c, p) for c, p in zip(children, plans, strict=True)))
        return self._end_step(index)

    def _end_step(self, index: int) -> bool:
        """Set the step's status from its children's; True when it completed."""
        state = self.state.steps[index]
        unfinished = [
            self.run.children[i]
            for i in state.children
            if self.run.children[i].status is not RunStatus.COMPLETED
        ]
        state.status = str(unfinished[0].status if unfinished else RunStatus.COMPLETED)
        return not unfinished

    def _expand(
        self, index: int, step: StepPlan, values: Mapping[str, str]
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
        if state.kind == STEP_PROMPT:
            return texts[0] if texts else ""
        return json.dumps(texts, ensure_ascii=False)


def _filled(child: ChildPlan, values: Mapping[str, str]) -> ChildPlan:
    def fill(text: str | None) -> str | None:
        return templates.render(text, values) if text is not None else None

    command = tuple(templates.render(a, values) for a in child.command) if child.command else None
    return attrs.evolve(child, prompt=fill(child.prompt), label=fill(child.label), command=command)
