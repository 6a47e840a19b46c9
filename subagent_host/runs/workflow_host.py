"""Host workflows for the run manager: keep their runners and do what each runner asks.

A `WorkflowRunner` decides which children a workflow's steps make; this is its
`WorkflowHost`: it adds those children to the run, has the run manager carry
each out, records the workflow as it goes, and settles the run at its end.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from subagent_host.backends.base import Backend
from subagent_host.runs.control import RunControl
from subagent_host.runs.plans import ChildPlan, RunPlan
from subagent_host.runs.projection import project
from subagent_host.runs.settling import Settler
from subagent_host.runs.state import ChildRun, Run, RunBook, RunStatus
from subagent_host.runs.workflow_runner import WorkflowRunner
from subagent_host.values.facts import Diagnostic, ErrorInfo

logger = logging.getLogger(__name__)


async def _no_snapshot(_run: Run, _path: str) -> str | None:
    return None


# A skipped `snapshotPath` write, as a warning on the run (see `Workflows.write_snapshot`).
SNAPSHOT_SKIPPED: Final = "snapshot-skipped"


@attrs.frozen
class WorkflowRecords:
    """Where a workflow's definition, its children's texts and its snapshot file go."""

    definition: Callable[[Run, RunPlan], None] = lambda _run, _plan: None
    child_added: Callable[[Run, int, dict[str, Any]], None] = lambda _run, _i, _p: None
    text: Callable[[Run, int, str], None] = lambda _run, _i, _t: None
    snapshot: Callable[[Run, str], Awaitable[str | None]] = _no_snapshot
    """Rewrite the workflow's `snapshotPath` with the run as it is now; the result is
    why the write was skipped (the path is no longer a regular file), or None."""
    touched: Callable[[Run], None] = lambda _run: None
    """Record a change of the run that came without an event (a new diagnostic)."""


@attrs.define(kw_only=True, eq=False)
class Workflows:
    """This server's workflow runners, and the run manager as each of them sees it."""

    _book: RunBook
    _backends: Mapping[str, Backend]
    _settler: Settler
    _records: WorkflowRecords
    _previous_cap: int
    _parallelism: int
    _run_child: Callable[[Run, int, ChildPlan, RunControl], Awaitable[str | None]]
    _remember_env: Callable[[Run, int, Mapping[str, str]], None]
    _runners: dict[str, WorkflowRunner] = attrs.field(factory=dict, init=False)

    # --- the runners -----------------------------------------------------------------

    def start(self, run: Run, plan: RunPlan, texts: Mapping[int, str] | None = None) -> None:
        """Give the run a new runner (replacing any earlier one)."""
        self._runners[run.run_id] = WorkflowRunner(
            run=run,
            plan=plan,
            host=self,
            previous_cap=self._previous_cap,
            texts=dict(texts or {}),
            parallelism=self._parallelism,
        )

    def get(self, run_id: str) -> WorkflowRunner | None:
        return self._runners.get(run_id)

    def forget(self, run_id: str) -> None:
        self._runners.pop(run_id, None)

    def record_definition(self, run: Run, plan: RunPlan) -> None:
        self._records.definition(run, plan)

    async def write_snapshot(self, run: Run) -> None:
        runner = self._runners.get(run.run_id)
        path = runner.workflow.snapshot_path if runner is not None else None
        if path is None:
            return
        try:
            skipped = await self._records.snapshot(run, path)
        except OSError as exc:  # the run goes on; the file is only a convenience
            logger.warning("cannot write the snapshot of run %s to %s: %s", run.run_id, path, exc)
            return
        if skipped is None:
            return
        # The path changed under the run (e.g. into a FIFO): it is left alone, the
        # run goes on, and its client learns why the file stopped changing — once.
        logger.info("snapshot of run %s not written: %s", run.run_id, skipped)
        warning = Diagnostic(
            severity="warning",
            code=SNAPSHOT_SKIPPED,
            message=f"the snapshot was not written: {skipped}",
            path="workflow.snapshotPath",
        )
        if warning not in run.diagnostics:
            run.diagnostics = (*run.diagnostics, warning)
            self._records.touched(run)

    # --- WorkflowHost ----------------------------------------------------------------

    def new_child(self, run: Run, plan: ChildPlan, step: int) -> ChildRun:
        """A workflow step's new child: queued, its projection recorded, its env remembered."""
        child = ChildRun(index=len(run.children), backend=plan.backend, label=plan.label, step=step)
        run.children.append(child)
        self._remember_env(run, child.index, plan.env)
        self._records.child_added(run, child.index, project(plan, self._backends[plan.backend]))
        self._book.emit(run, "child", index=child.index, status=str(child.status))
        return child

    def run_child(
        self, run: Run, index: int, plan: ChildPlan, control: Any
    ) -> Awaitable[str | None]:
        return self._run_child(run, index, plan, control)

    def keep_text(self, run: Run, index: int, text: str) -> None:
        self._records.text(run, index, text)

    async def step_ended(self, run: Run) -> None:
        await self.write_snapshot(run)

    def settle(
        self, run: Run, control: Any, children: Sequence[ChildRun], last_text: str | None
    ) -> None:
        self._settler.settle_workflow(run, control.stop_reason, children, last_text)

    def fail(self, run: Run, error: ErrorInfo) -> None:
        self._book.transition(run, RunStatus.FAILED, error=error)
