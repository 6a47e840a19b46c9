"""Turn a `workflow` request into item templates and steps, every problem found at once.

Each item of each step is resolved like any spawn item (its prompt, label and
command arguments stay templates); steps refer to the items by index. Before
anything runs, every placeholder is checked where it stands: `{previous}` needs
an earlier step, `{outputs.NAME}` an earlier step or item whose `as` is NAME,
`{item}` and `{index}` a forEach item. Output names are unique in a workflow.
"""

from __future__ import annotations

import os
from typing import Final

import attrs

from subagent_host.config import DEFAULT_MAX_PARALLEL
from subagent_host.planning import templates
from subagent_host.planning.items import ItemResolver
from subagent_host.planning.plan import ChildPlan, WorkflowPlan
from subagent_host.planning.problems import Problems
from subagent_host.planning.request import ForEachStep, ParallelStep, SpawnItem, WorkflowRequest
from subagent_host.planning.snapshot_path import NO_SERVER_FILES, ServerFiles, refusal
from subagent_host.planning.views import PlanStep
from subagent_host.values import STEP_FOR_EACH, STEP_PARALLEL, STEP_PROMPT
from subagent_host.values.copying import shared
from subagent_host.values.plurals import between

MAX_WORKFLOW_STEPS: Final = 32
MAX_NAME_LENGTH: Final = 128


def plan_workflow(
    problems: Problems,
    workflow: WorkflowRequest,
    items: ItemResolver,
    cwd: str,
    max_parallel: int = DEFAULT_MAX_PARALLEL,
    server: ServerFiles = NO_SERVER_FILES,
) -> tuple[tuple[ChildPlan, ...], WorkflowPlan | None]:
    """The item templates and the workflow plan (None when nothing could be planned)."""
    if not workflow.name.strip() or len(workflow.name) > MAX_NAME_LENGTH:
        problems.error(
            "invalid-workflow", f"name must be 1..{MAX_NAME_LENGTH} characters", "workflow.name"
        )
    if not 1 <= len(workflow.chain) <= MAX_WORKFLOW_STEPS:
        problems.error(
            "item-count",
            f"workflow.chain takes 1 to {MAX_WORKFLOW_STEPS} steps, not {len(workflow.chain)}",
            "workflow.chain",
        )
    children: list[ChildPlan] = []
    steps: list[PlanStep] = []
    outputs: set[str] = set()
    for index, step in enumerate(workflow.chain):
        planner = _StepPlanner(
            problems, index, previous=index > 0, outputs=frozenset(outputs), most=max_parallel
        )
        planned = planner.plan(step, items, children)
        steps.append(planned)
        for name, where in planner.names:
            _add_output(problems, outputs, name, where)
    snapshot_path = _snapshot_path(problems, workflow.snapshot_path, cwd, server)
    if not steps:
        return (), None
    plan = WorkflowPlan(
        name=workflow.name,
        task=workflow.task,
        steps=tuple(steps),
        snapshot_path=snapshot_path,
    )
    return tuple(children), plan


@attrs.define
class _StepPlanner:
    """One step: its items resolved and appended, its templates checked, its output names."""

    _problems: Problems
    _index: int
    _previous: bool = attrs.field(kw_only=True)
    _outputs: frozenset[str] = attrs.field(kw_only=True)
    _most: int = attrs.field(kw_only=True)
    names: list[tuple[str, str]] = attrs.field(init=False, factory=list)
    """The output names this step defines, with where each was given."""

    def plan(
        self,
        step: SpawnItem | ParallelStep | ForEachStep,
        items: ItemResolver,
        children: list[ChildPlan],
    ) -> PlanStep:
        index = self._index
        path = f"workflow.chain[{index}]"
        if isinstance(step, ParallelStep):
            count = len(step.parallel)
            if not 1 <= count <= self._most:
                self._problems.error(
                    "item-count",
                    f"parallel takes {between(1, self._most, 'item')}, not {count}",
                    f"{path}.parallel",
                )
            entries = [(f"{path}.parallel[{i}]", item) for i, item in enumerate(step.parallel)]
            indices = self._items(entries, items, children, loop=False, own_names=True)
            self._name(step.output_name, f"{path}.as")
            # The step's `output_name` and `label`, as requested.
            return shared(PlanStep, step, index=index, kind=STEP_PARALLEL, items=indices)
        if isinstance(step, ForEachStep):
            self._check(step.over, f"{path}.forEach", loop=False)
            if step.item.output_name is not None:
                self._problems.error(
                    "invalid-output-name",
                    "a forEach item runs many times: name the fan-out's output with the "
                    "step's own `as`",
                    f"{path}.item.as",
                )
            indices = self._items(
                [(f"{path}.item", step.item)], items, children, loop=True, own_names=False
            )
            self._name(step.output_name, f"{path}.as")
            return shared(
                PlanStep, step, index=index, kind=STEP_FOR_EACH, items=indices, over=step.over
            )
        indices = self._items([(path, step)], items, children, loop=False, own_names=True)
        # Its label is its child's.
        return PlanStep(index=index, kind=STEP_PROMPT, items=indices, output_name=step.output_name)

    def _items(
        self,
        entries: list[tuple[str, SpawnItem]],
        items: ItemResolver,
        children: list[ChildPlan],
        *,
        loop: bool,
        own_names: bool,
    ) -> tuple[int, ...]:
        indices = []
        for path, item in entries:
            if item.agent is not None and item.prompt is None:
                # A definition's text is no template: in a workflow, say what the agent does.
                self._problems.error(
                    "missing-prompt",
                    "a workflow item that names an agent needs a prompt "
                    "(`{task}` gives it the workflow's task)",
                    f"{path}.prompt",
                )
            for field, template in (("prompt", item.prompt), ("label", item.label)):
                if template is not None:
                    self._check(template, f"{path}.{field}", loop=loop)
            for position, argument in enumerate(item.command or ()):
                self._check(argument, f"{path}.command[{position}]", loop=loop)
            children.append(items.resolve(path, item))
            indices.append(len(children) - 1)
            if own_names:
                self._name(item.output_name, f"{path}.as")
        return tuple(indices)

    def _check(self, template: str, path: str, *, loop: bool) -> None:
        for problem in templates.check(
            template, previous=self._previous, outputs=self._outputs, loop=loop
        ):
            self._problems.error("invalid-template", problem, path)

    def _name(self, name: str | None, path: str) -> None:
        if name is not None:
            self.names.append((name, path))


def _add_output(problems: Problems, outputs: set[str], name: str, path: str) -> None:
    if templates.OUTPUT_NAME.fullmatch(name) is None:
        problems.error("invalid-output-name", "use 1-64 characters of A-Z a-z 0-9 _ -", path)
    elif name in outputs:
        problems.error(
            "duplicate-output", f"another step or item already names its output {name!r}", path
        )
    outputs.add(name)


def _snapshot_path(
    problems: Problems, value: str | None, cwd: str, server: ServerFiles
) -> str | None:
    """An absolute path in an existing, writable directory (relative paths are the call's
    cwd's), naming nothing yet or a regular file outside the system trees and the
    server's own files (`refusal`)."""
    if value is None:
        return None
    where = "workflow.snapshotPath"
    if not value or "\0" in value:
        problems.error("invalid-snapshot-path", "must be a non-empty path", where)
        return None
    path = os.path.join(cwd, os.path.expanduser(value))
    directory, name = os.path.split(os.path.abspath(path))
    try:
        real = os.path.join(os.path.realpath(directory), name)
    except OSError as exc:  # a link on the way whose target may not be read
        why = f"{directory!r} cannot be examined: {exc.strerror or exc}"
        problems.error("invalid-snapshot-path", why, where)
        return None
    if not os.path.isdir(directory):
        problems.error("invalid-snapshot-path", f"{directory!r} is not a directory", where)
    elif (problem := refusal(real, server)) is not None:
        problems.error("invalid-snapshot-path", problem, where)
    elif not os.access(directory, os.W_OK | os.X_OK):
        problems.error("invalid-snapshot-path", f"{directory!r} is not writable", where)
    return real
