"""Carry runs out: create each run, drive its children in the order its kind says, settle it.

A run is a plan of children (`single`, `parallel` tasks, a `chain` passing
`{previous}` on, or a `workflow`, whose steps `workflow_runner.py` carries
out). This module orchestrates: launch, resume, stop, wait, detach, forget,
shutdown. Every child, of every kind and of every resume, goes the one way
`child_runner.py` takes it (slot -> start -> supervise -> settle); the run's
one terminal status then follows from its children's (`settling.py`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final

from subagent_host.backends.sessions import SessionFiles
from subagent_host.config import DEFAULT_MAX_QUEUE
from subagent_host.errors import CapacityExceeded
from subagent_host.planning.executable import identify_children
from subagent_host.planning.plan import ChildPlan, LaunchPlan, RunPlan
from subagent_host.planning.projection import project
from subagent_host.planning.views import Projection
from subagent_host.runs import heap_trim, lifecycle_log
from subagent_host.runs.child_runner import ChildRunner, internal_error
from subagent_host.runs.child_sink import StreamGate
from subagent_host.runs.endings import ChildCancelled, ChildFailed, Failed
from subagent_host.runs.live_child import initial_turn
from subagent_host.runs.outputs import OutputCaps
from subagent_host.runs.run_control import RunControl
from subagent_host.runs.services import ChildServices
from subagent_host.runs.settling import Settler
from subagent_host.runs.state import (
    TERMINAL,
    ChildRun,
    Run,
    RunStatus,
    prompt_head,
)
from subagent_host.runs.workflow_records import WorkflowRecords
from subagent_host.runs.workflow_runner import WORKFLOW_PARALLELISM, WorkflowRunner, initial_state
from subagent_host.values import RunKind
from subagent_host.values.choices import AdmittedBy, StepStatus
from subagent_host.values.error_data import QueueFull
from subagent_host.values.facts import Executable

# Other modules import these from here.
__all__ = ["OutputCaps", "RunOrchestrator", "WorkflowRecords"]

logger = logging.getLogger(__name__)

# Finished runs stay in memory for quick reads; older ones are read from the store.
FINISHED_KEPT_IN_MEMORY: Final = 1_000
# A stop returns once the tree is gone: the grace, then SIGKILL's own bound.
STOP_SETTLE_MARGIN_S: Final = 30.0


class RunOrchestrator:
    """Owns every run of this server process."""

    def __init__(
        self,
        services: ChildServices,
        *,
        grace_ms: int,
        new_run_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        on_launch: Callable[[Run, list[Projection]], None] | None = None,
        workflow_records: WorkflowRecords | None = None,
        workflow_parallelism: int = WORKFLOW_PARALLELISM,
        max_queue: int = DEFAULT_MAX_QUEUE,
    ) -> None:
        self._services = services
        self._backends = services.backends
        self._state_machine = services.state_machine
        self._caps = services.caps
        self._settler = Settler(services.state_machine, services.caps)
        self._grace_s = grace_ms / 1000
        self._new_run_id = new_run_id
        self._on_launch = on_launch
        self._children = ChildRunner(services, self._settler)
        self._workflow_records = workflow_records or WorkflowRecords()
        self._workflow_parallelism = workflow_parallelism
        self._max_queue = max_queue
        self._workflows: dict[str, WorkflowRunner] = {}  # by run id
        self._runs: dict[str, Run] = {}
        # The runs being carried out (launched or resumed, their task not over): the
        # only ones that can be live. Admission looks at these at every spawn, not
        # at the up to FINISHED_KEPT_IN_MEMORY finished runs kept beside them.
        self._carried: dict[str, Run] = {}
        self._finished: collections.deque[str] = collections.deque()
        self._controls: dict[str, RunControl] = {}
        self._cleanups: set[asyncio.Task[object]] = set()
        """Removals of the worktrees of pruned runs still going on (awaited at shutdown)."""

    @property
    def services(self) -> ChildServices:
        """The server's parts every child goes through (its backends, how programs are
        identified): a resume checks what it would start against them."""
        return self._services

    @property
    def sessions(self) -> SessionFiles | None:
        """The agent CLIs' session files: sealed when an attempt ends, checked on resume."""
        return self._children.sessions

    @property
    def streams(self) -> StreamGate:
        """Closed while the client's outgoing queue is full (app.py): streamed
        children are then held back; others are not (their output is not queued)."""
        return self._children.streams

    # --- queries ---------------------------------------------------------------------

    def get(self, run_id: str) -> Run | None:
        return self._runs.get(run_id)

    def control_of(self, run_id: str) -> RunControl | None:
        """A run's controls while this server carries it out (its live children's too)."""
        return self._controls.get(run_id)

    def live(self) -> list[Run]:
        """Runs of this server that are not terminal yet."""
        return [run for run in self._carried.values() if not run.is_terminal]

    def waiting(self, adding: int = 0) -> int:
        """Children that would wait for a slot with `adding` more: every `queued` child of a
        live run (a chain's later items too: counting them errs on the safe side), less
        the slots free now."""
        queued = sum(
            child.status is RunStatus.QUEUED
            for run in self._carried.values()
            if not run.is_terminal
            for child in run.children
        )
        return max(0, queued + adding - self._services.slots.free)

    def check_capacity(self, adding: int) -> None:
        """Raise CapacityExceeded when `adding` more children would leave more than
        `--max-queue` waiting (protocol.md §8.4); called before anything of the run exists.

        Spawn and resume also call it before they spend a preflight id or a token, and
        `launch` and `resume` call it again where nothing awaits until the run is made.
        """
        if self.waiting(adding) > self._max_queue:
            queued = self.waiting()
            raise CapacityExceeded(
                f"capacity exceeded: {queued} waiting for a slot, "
                f"at most {self._max_queue} may (--max-queue)",
                data=QueueFull(queued, self._max_queue),
            )

    @staticmethod
    def children_added(plan: RunPlan) -> int:
        """The children a launch of `plan` queues at once: all of them, but a workflow's
        are made step by step (counted as one)."""
        return 1 if plan.workflow is not None else len(plan.children)

    # --- commands --------------------------------------------------------------------

    def launch(
        self,
        plan: LaunchPlan,
        session_id: str,
        admitted_by: AdmittedBy = AdmittedBy.DIRECT,
        mode: str | None = None,
        background: tuple[int, ...] = (),
        programs: Sequence[Executable | None] = (),
    ) -> Run:
        """Create the run (queued) and start carrying it out in the background.

        `mode` is how its request is answered, kept with the run for its resumes;
        `background` the members of a mixed `tasks` run that run in the background:
        a `task`-mode answer is due once the others have ended (`wait_for_reply`).
        `programs` are the files its agent children's programs are (`identify`), by
        child, recorded with their projections (a workflow's children identify their own).
        Raises CapacityExceeded, with nothing made, when the queue is full (`check_capacity`).
        """
        self.check_capacity(self.children_added(plan))
        run = Run(
            run_id=self._new_run_id(),
            session_id=session_id,
            kind=plan.kind,
            fingerprint=plan.fingerprint,
            created_at=self._state_machine.now(),
            label=plan.label,
            admitted_by=admitted_by,
            egress_consent=plan.egress_consent,
            mode=mode,
            background=background,
            children=[
                ChildRun(
                    index=i,
                    backend=child.backend,
                    label=child.label,
                    prompt_head=prompt_head(child.prompt),
                    turn=initial_turn(child),
                )
                for i, child in enumerate(plan.children)
            ],
        )
        if plan.workflow is not None:  # its children are made step by step
            run.children = []
            run.workflow = initial_state(plan)
            self._start_workflow(run, plan)
        self._runs[run.run_id] = run
        self._carried[run.run_id] = run
        for child in run.children:
            self._children.remember_env(run, child.index, plan.children[child.index].env)
        control = RunControl(grace_s=self._grace_s, stream=plan.stream, raw_output=plan.raw_output)
        self._controls[run.run_id] = control
        # Queued until its first child starts (the run state machine moves it to running then).
        self._state_machine.created(run)
        if self._on_launch is not None:
            self._on_launch(
                run,
                [
                    project(
                        child,
                        self._backends[child.backend],
                        programs[index] if index < len(programs) else None,
                    )
                    for index, child in enumerate(plan.children[: len(run.children)])
                ],
            )
        if plan.workflow is not None:
            self._workflow_records.definition(run, plan)
        control.task = asyncio.create_task(
            self._carry_out(run, control, self._drive_children(run, plan, control))
        )
        return run

    async def identify(self, plan: RunPlan) -> tuple[Executable | None, ...]:
        """Which file each agent child of `plan` would run (none for a workflow: its
        children are identified as each step makes them), for `launch`."""
        if plan.workflow is not None:
            return ()
        return await identify_children(plan.children, self._backends, self._services.identities)

    def workflow_of(self, run_id: str) -> WorkflowRunner | None:
        """A workflow's runner while this server still has it (its templates' env values)."""
        return self._workflows.get(run_id)

    def _start_workflow(
        self, run: Run, plan: RunPlan, texts: Mapping[int, str] | None = None
    ) -> None:
        """Give the workflow run a new runner (replacing any earlier one)."""
        self._workflows[run.run_id] = WorkflowRunner(
            run=run,
            plan=plan,
            children=self._children,
            services=self._services,
            settler=self._settler,
            records=self._workflow_records,
            texts=dict(texts or {}),
            parallelism=self._workflow_parallelism,
        )

    def keep(self, run: Run) -> Run:
        """The one object this server keeps for the run: an earlier one wins.

        Runs read from the store are copies; two requests may each hold one. Whatever
        changes a run must change this one.
        """
        return self._runs.setdefault(run.run_id, run)

    def env_of(self, run_id: str, index: int) -> Mapping[str, str] | None:
        """The environment values a child was launched with, if this server still has them."""
        return self._children.env_of(run_id, index)

    def cli_environment(self, backend: str, run_id: str, index: int) -> dict[str, str]:
        """What a new attempt of the child would see of where its CLI keeps its files
        (without the run markers): the server's allowed variables, then its `env`."""
        return self._children.cli_environment(backend, run_id, index)

    def resume(
        self,
        run: Run,
        index: int,
        plan: ChildPlan,
        stream: bool = False,
        workflow: tuple[RunPlan, Mapping[int, str]] | None = None,
    ) -> Run:
        """Run a new attempt of one child of a terminal run, in the same run.

        Each attempt keeps its own terminal status (the store keeps every
        attempt); the run's status follows again from its children's newest
        attempts once this one has ended. A workflow's remaining steps then run
        when the attempt completed its step: `workflow` is its plan and the
        completed children's texts, when this server no longer has them.
        Raises CapacityExceeded, with nothing changed, when the queue is full.
        """
        assert run.is_terminal, "only a terminal run is resumed"
        self.check_capacity(1)
        self._runs[run.run_id] = run
        self._carried[run.run_id] = run
        old = run.children[index]
        run.replace_child(
            ChildRun(
                index=index,
                backend=plan.backend,
                label=old.label,
                attempt=old.attempt + 1,
                step=old.step,
                prompt_head=prompt_head(plan.prompt),
                turn=initial_turn(plan),
                # A resumed attempt works in the worktree the earlier one left.
                workspace=old.workspace,
                workspace_cwd=old.workspace_cwd,
            )
        )
        if workflow is not None:
            self._start_workflow(run, *workflow)
        control = RunControl(grace_s=self._grace_s, stream=stream)
        self._controls[run.run_id] = control
        self._state_machine.reopen(run)
        lifecycle_log.run_resumed(run, run.children[index])
        control.task = asyncio.create_task(
            self._carry_out(run, control, self._execute_resume(run, index, plan, control))
        )
        return run

    async def _execute_resume(
        self, run: Run, index: int, plan: ChildPlan, control: RunControl
    ) -> None:
        text = await self._children.run(run, index, plan, control)
        runner = self._workflows.get(run.run_id)
        if runner is None:
            self._settler.settle_run(run, control.stop_reason)
            return
        await runner.resume(index, text, control)

    async def _carry_out(self, run: Run, control: RunControl, work: Awaitable[None]) -> None:
        """Run `work` (a launch or a resume) to the run's end, whatever happens in it."""
        try:
            await work
        except Exception as exc:  # a bug of ours: the run still gets a truthful end
            logger.exception("run %s failed internally", run.run_id, extra={"runId": run.run_id})
            error = internal_error(exc)
            for child in run.children:  # each child, too, ends exactly once
                self._state_machine.transition_child(run, child, ChildFailed(error))
            for step in run.workflow.steps if run.workflow is not None else ():
                self._state_machine.transition_step(run, step, StepStatus.FAILED)  # if it ran
            self._state_machine.transition(run, Failed(error))
        finally:
            control.done.set()
            control.reply_due.set()
            if run.is_terminal:  # else (cancelled at shutdown) it still counts as live
                self._carried.pop(run.run_id, None)
            self._forget_old(run)

    async def wait(self, run: Run) -> None:
        """Return once the run is terminal."""
        control = self._controls.get(run.run_id)
        if control is not None:
            await control.done.wait()

    async def wait_for_reply(self, run: Run) -> None:
        """Return once the run is terminal, or once it was detached (`detach`)."""
        control = self._controls.get(run.run_id)
        if control is not None:
            await control.reply_due.wait()

    def detach(self, run: Run) -> bool:
        """Answer every `task`-mode request waiting on the run now; the run goes on.

        False when there is nothing to detach (the run is terminal, or not this server's).
        """
        control = self._controls.get(run.run_id)
        if run.is_terminal or control is None or control.done.is_set():
            return False
        control.reply_due.set()
        return True

    async def stop(self, run: Run, *, grace_ms: int | None, reason: str) -> bool:
        """Stop the run's children (SIGTERM, grace, SIGKILL); True if it was already terminal."""
        if run.is_terminal:
            return True
        control = self.begin_stop(run, grace_ms=grace_ms, reason=reason)
        await asyncio.wait_for(control.done.wait(), control.grace_s + STOP_SETTLE_MARGIN_S)
        return False

    def begin_stop(self, run: Run, *, grace_ms: int | None, reason: str) -> RunControl:
        """Tell a live run to stop (as `stop`), without waiting for its end.

        The run's own task ends its trees: SIGTERM, the grace, SIGKILL.
        """
        control = self._controls[run.run_id]
        if control.stop_reason is None:  # the first stop's reason and grace stand
            control.stop_reason = reason
            if grace_ms is not None:
                control.grace_s = grace_ms / 1000
            lifecycle_log.stop_requested(run, reason, control.grace_s)
            control.stopping.set_result(None)
        return control

    async def abandon(self, run: Run, reason: str) -> None:
        """End the run's children at once (no grace) and forget the run.

        For a run the store could not record: nothing of it may outlive the
        error its request is answered with.
        """
        with contextlib.suppress(TimeoutError):  # logged by the supervisor
            await self.stop(run, grace_ms=0, reason=reason)
        self._drop(run.run_id)

    async def shutdown(self, reason: str) -> None:
        """Stop every run that is not terminal yet (client gone, or server stopping)."""
        live = self.live()
        await asyncio.gather(
            *(self.stop(run, grace_ms=None, reason=reason) for run in live),
            *self._cleanups,
            return_exceptions=True,
        )

    # --- carrying a run out ----------------------------------------------------------

    async def _drive_children(self, run: Run, plan: RunPlan, control: RunControl) -> None:
        """Run the children in the order the run's kind says (a workflow through its
        runner), then settle the run."""
        runner = self._workflows.get(run.run_id)
        if runner is not None:
            await runner.carry_out(control)
            return
        if plan.kind is RunKind.PARALLEL:
            await asyncio.gather(
                *(self._run_member(run, i, child, control) for i, child in enumerate(plan.children))
            )
        else:
            previous: str | None = None
            for i, child in enumerate(plan.children):
                previous = await self._children.run(run, i, child, control, previous)
                if run.children[i].status is not RunStatus.COMPLETED:
                    self._skip_rest(run, i)
                    break
        self._settler.settle_run(run, control.stop_reason)

    async def _run_member(self, run: Run, index: int, plan: ChildPlan, control: RunControl) -> None:
        """One member of a `tasks` run. In a mixed run, the answer of its `task`-mode
        request is due once every member it waits for has ended; the background ones
        run on, and the run ends (once) when they have ended too. When none is left
        running, the answer waits for the run's end (`_carry_out`): it then shows the
        terminal run, never a run still `running` with every member ended."""
        await self._children.run(run, index, plan, control)
        if not run.background or any(c.status not in TERMINAL for c in run.waited_for):
            return
        if any(child.status not in TERMINAL for child in run.children):
            control.reply_due.set()

    def _forget_old(self, finished: Run) -> None:
        """Keep the newest finished runs in memory, without their events (each may
        hold MAX_EVENT_BYTES_KEPT: they are read from the store); older runs are
        read from the store altogether."""
        held = finished.events.bytes
        finished.events.release()
        heap_trim.trim_heap(held)
        self._finished.append(finished.run_id)
        while len(self._finished) > FINISHED_KEPT_IN_MEMORY:
            self._drop(self._finished.popleft())

    def _drop(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
        self._carried.pop(run_id, None)
        self._controls.pop(run_id, None)
        self._children.forget(run_id)
        self._workflows.pop(run_id, None)

    def forget(self, run_ids: Sequence[str]) -> None:
        """Forget runs the history deleted (pruned by `--history-limit`): -32001 from now on.

        A run that is live again here (resumed since the prune chose it) is kept:
        its next write records it anew.
        """
        deleted = set()
        for run_id in run_ids:
            run = self._runs.get(run_id)
            if run is not None and not run.is_terminal:
                continue
            deleted.add(run_id)
            if run is None:
                continue
            with contextlib.suppress(ValueError):
                self._finished.remove(run_id)
            self._drop(run_id)
        self._remove_worktrees(deleted)

    def _remove_worktrees(self, run_ids: set[str]) -> None:
        """Remove the git worktrees of runs the history deleted (protocol.md §8.7), in the
        background: git runs a while, and the write that pruned them must not wait."""
        worktrees = self._children.worktrees
        if not run_ids or worktrees is None:
            return
        task = asyncio.create_task(worktrees.remove_of_runs(run_ids))
        self._cleanups.add(task)
        task.add_done_callback(_worktrees_removed)
        task.add_done_callback(self._cleanups.discard)

    def _skip_rest(self, run: Run, failed_index: int) -> None:
        for later in run.children[failed_index + 1 :]:
            reason = f"not run: step {failed_index} did not complete"
            self._state_machine.transition_child(run, later, ChildCancelled(reason))


def _worktrees_removed(task: asyncio.Task[object]) -> None:
    """Log a removal of pruned runs' worktrees that failed (`subagent-host worktrees` lists
    what is left)."""
    if not task.cancelled() and (error := task.exception()) is not None:
        logger.warning("cannot remove the worktrees of pruned runs: %r", error)
