"""Carry runs out: schedule children under the server-wide limit, supervise each, settle one status.

A run is a plan of children (`single`, `parallel` tasks, a `chain` passing
`{previous}` on, or a `workflow`, whose steps `workflow_runner.py` carries
out). Each child waits its turn for a slot (`queued`), is started through its
backend and the supervisor (`running`), and ends in exactly one terminal status.
What ends it is decided in one place, `_supervise`: the child's own exit, a
stop request, its timeout, a stall, or its turn limit (`maxTurns`, counted from
the CLI's events) — the first of them wins, and the state machine refuses any
later status.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from subagent_host.backends.base import MAX_TURNS_LIMIT, Backend, OutputParser
from subagent_host.backends.environment import allowed_environment, child_environment
from subagent_host.backends.sessions import SEALED_AT_END, SessionFiles
from subagent_host.backends.supervisor import LEFTOVER_GRACE_S, Child, LaunchSpec, Supervisor
from subagent_host.runs import heap, templates
from subagent_host.runs.child_sink import ChildSink, StreamGate
from subagent_host.runs.control import RunControl
from subagent_host.runs.outputs import PREVIOUS_PLACEHOLDER, OutputCaps
from subagent_host.runs.plans import (
    EMPTY_PROMPT,
    ChildPlan,
    RunPlan,
    is_empty_prompt,
    plan_fingerprint,
)
from subagent_host.runs.projection import project
from subagent_host.runs.sampling import ResourceSampler, record_usage
from subagent_host.runs.scheduler import Slots
from subagent_host.runs.settling import Ending, Settler
from subagent_host.runs.state import ADMITTED_DIRECT, ChildRun, Run, RunBook, RunKind, RunStatus
from subagent_host.runs.workflow_host import WorkflowRecords, Workflows
from subagent_host.runs.workflow_runner import WORKFLOW_PARALLELISM, WorkflowRunner, initial_state
from subagent_host.values.facts import ErrorInfo

# Other modules import these from here.
__all__ = ["OutputCaps", "RunManager", "WorkflowRecords"]

logger = logging.getLogger(__name__)

# How long an agent CLI may take to exit after printing its final event; it then
# gets the supervisor's LEFTOVER_GRACE_MS to go on SIGTERM.
FINISHED_GRACE_S: Final = 5.0
# Finished runs stay in memory for quick reads; older ones are read from the store.
FINISHED_KEPT_IN_MEMORY: Final = 1_000
# A stop returns once the tree is gone: the grace, then SIGKILL's own bound.
STOP_SETTLE_MARGIN_S: Final = 30.0

# How much of a program name a spawn-failed message quotes.
PROGRAM_SHOWN_CHARS: Final = 200

# An agent CLI that printed its final event and then did not exit.
LINGERED: Final = Ending(RunStatus.COMPLETED, "lingered after its final event")
# An agent CLI that began one model response more than its `maxTurns`.
MAX_TURNS: Final = Ending(RunStatus.LIMIT_REACHED, MAX_TURNS_LIMIT, reached_limit=MAX_TURNS_LIMIT)


class RunManager:
    """Owns every run of this server process."""

    def __init__(
        self,
        *,
        supervisor: Supervisor,
        backends: Mapping[str, Backend],
        slots: Slots,
        book: RunBook,
        caps: OutputCaps,
        server_env: Mapping[str, str],
        depth: int,
        grace_ms: int,
        new_run_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        on_launch: Callable[[Run, list[dict[str, Any]]], None] | None = None,
        workflow_records: WorkflowRecords | None = None,
        workflow_parallelism: int = WORKFLOW_PARALLELISM,
        sessions: SessionFiles | None = None,
    ) -> None:
        self._supervisor = supervisor
        self._backends = backends
        self._slots = slots
        self._book = book
        self._caps = caps
        self._settler = Settler(book, caps)
        self._server_env = dict(server_env)
        self._depth = depth
        self._grace_s = grace_ms / 1000
        self._new_run_id = new_run_id
        self.sessions = sessions
        """The agent CLIs' session files: sealed when an attempt ends, checked on resume."""
        self._on_launch = on_launch
        self._workflows = Workflows(
            book=book,
            backends=backends,
            settler=self._settler,
            records=workflow_records or WorkflowRecords(),
            previous_cap=caps.previous_bytes,
            parallelism=workflow_parallelism,
            run_child=self._run_workflow_child,
            remember_env=self._remember_env,
        )
        self._runs: dict[str, Run] = {}
        # Each child's environment values, by run: never stored, so a resume of
        # a child launched with `env` works only while this server remembers them.
        self._envs: dict[str, dict[int, Mapping[str, str]]] = {}  # by run id, then child index
        self._finished: collections.deque[str] = collections.deque()
        self._controls: dict[str, RunControl] = {}
        self._sampler = ResourceSampler(supervisor)
        self.streams = StreamGate()
        """Closed while the client's outgoing queue is full (app.py): streamed
        children are then held back; others are not (their output is not queued)."""

    # --- queries ---------------------------------------------------------------------

    def get(self, run_id: str) -> Run | None:
        return self._runs.get(run_id)

    def live(self) -> list[Run]:
        """Runs of this server that are not terminal yet."""
        return [run for run in self._runs.values() if not run.is_terminal]

    # --- commands --------------------------------------------------------------------

    def launch(
        self,
        plan: RunPlan,
        session_id: str,
        admitted_by: str = ADMITTED_DIRECT,
        mode: str | None = None,
    ) -> Run:
        """Create the run (queued) and start carrying it out in the background.

        `mode` is how its request is answered, kept with the run for its resumes.
        """
        run = Run(
            run_id=self._new_run_id(),
            session_id=session_id,
            kind=plan.kind,
            fingerprint=plan_fingerprint(plan, self._backends, plan.access),
            created_at=self._book.now(),
            label=plan.label,
            admitted_by=admitted_by,
            mode=mode,
            children=[
                ChildRun(index=i, backend=child.backend, label=child.label)
                for i, child in enumerate(plan.children)
            ],
        )
        if plan.workflow is not None:  # its children are made step by step
            run.children = []
            run.workflow = initial_state(plan.workflow)
            self._workflows.start(run, plan)
        self._runs[run.run_id] = run
        self._envs[run.run_id] = {c.index: plan.children[c.index].env for c in run.children}
        control = RunControl(grace_s=self._grace_s, stream=plan.stream)
        self._controls[run.run_id] = control
        # Queued until its first child starts (the run book moves it to running then).
        self._book.created(run)
        if self._on_launch is not None:
            self._on_launch(
                run,
                [
                    project(child, self._backends[child.backend])
                    for child in plan.children[: len(run.children)]
                ],
            )
        if plan.workflow is not None:
            self._workflows.record_definition(run, plan)
        control.task = asyncio.create_task(
            self._carry_out(run, control, self._execute(run, plan, control))
        )
        return run

    def workflow_of(self, run_id: str) -> WorkflowRunner | None:
        """A workflow's runner while this server still has it (its templates' env values)."""
        return self._workflows.get(run_id)

    def adopt(self, run: Run) -> Run:
        """The one object this server keeps for the run: an earlier one wins.

        Runs read from the store are copies; two requests may each hold one. Whatever
        changes a run must change this one.
        """
        return self._runs.setdefault(run.run_id, run)

    def env_of(self, run_id: str, index: int) -> Mapping[str, str] | None:
        """The environment values a child was launched with, if this server still has them."""
        return self._envs.get(run_id, {}).get(index)

    def cli_environment(self, backend: str, run_id: str, index: int) -> dict[str, str]:
        """What a new attempt of the child would see of where its CLI keeps its files
        (without the run markers): the server's allowed variables, then its `env`."""
        env = allowed_environment(self._server_env, self._backends[backend].env_allowed)
        env.update(self.env_of(run_id, index) or {})
        return env

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
        """
        assert run.is_terminal, "only a terminal run is resumed"
        self._runs[run.run_id] = run
        old = run.children[index]
        run.children[index] = ChildRun(
            index=index,
            backend=plan.backend,
            label=old.label,
            attempt=old.attempt + 1,
            step=old.step,
        )
        if workflow is not None:
            self._workflows.start(run, *workflow)
        control = RunControl(grace_s=self._grace_s, stream=stream)
        self._controls[run.run_id] = control
        self._book.reopen(run)
        control.task = asyncio.create_task(
            self._carry_out(run, control, self._execute_resume(run, index, plan, control))
        )
        return run

    async def _execute_resume(
        self, run: Run, index: int, plan: ChildPlan, control: RunControl
    ) -> None:
        text = await self._run_child(run, index, plan, None, control)
        runner = self._workflows.get(run.run_id)
        if runner is None:
            self._settler.settle_run(run, control.stop_reason)
            return
        if text is not None:
            runner.keep(index, text)
        await runner.resumed(index, control)
        await self._workflows.write_snapshot(run)

    async def _carry_out(self, run: Run, control: RunControl, work: Awaitable[None]) -> None:
        """Run `work` (a launch or a resume) to the run's end, whatever happens in it."""
        try:
            await work
        except Exception as exc:  # a bug of ours: the run still gets a truthful end
            logger.exception("run %s failed internally", run.run_id)
            error = ErrorInfo("internal", f"internal error ({type(exc).__name__})")
            for child in run.children:  # each child, too, ends exactly once
                self._book.transition_child(run, child, RunStatus.FAILED, error=error)
            self._book.transition(run, RunStatus.FAILED, error=error)
        finally:
            control.done.set()
            control.reply_due.set()
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
        control = self._controls[run.run_id]
        if control.stop_reason is None:  # the first stop's reason and grace stand
            control.stop_reason = reason
            if grace_ms is not None:
                control.grace_s = grace_ms / 1000
            control.stopping.set_result(None)
        await asyncio.wait_for(control.done.wait(), control.grace_s + STOP_SETTLE_MARGIN_S)
        return False

    async def abandon(self, run: Run, reason: str) -> None:
        """End the run's children at once (no grace) and forget the run.

        For a run the store could not record: nothing of it may outlive the
        error its request is answered with.
        """
        with contextlib.suppress(TimeoutError):  # logged by the supervisor
            await self.stop(run, grace_ms=0, reason=reason)
        self._runs.pop(run.run_id, None)
        self._controls.pop(run.run_id, None)
        self._envs.pop(run.run_id, None)
        self._workflows.forget(run.run_id)

    async def shutdown(self, reason: str) -> None:
        """Stop every run that is not terminal yet (client gone, or server stopping)."""
        live = [run for run in self._runs.values() if not run.is_terminal]
        await asyncio.gather(
            *(self.stop(run, grace_ms=None, reason=reason) for run in live),
            return_exceptions=True,
        )

    # --- carrying a run out ----------------------------------------------------------

    async def _execute(self, run: Run, plan: RunPlan, control: RunControl) -> None:
        runner = self._workflows.get(run.run_id)
        if runner is not None:
            await runner.run_from(0, control)
            await self._workflows.write_snapshot(run)
            return
        if plan.kind is RunKind.PARALLEL:
            await asyncio.gather(
                *(
                    self._run_child(run, i, child, None, control)
                    for i, child in enumerate(plan.children)
                )
            )
        else:
            previous: str | None = None
            for i, child in enumerate(plan.children):
                previous = await self._run_child(run, i, child, previous, control)
                if run.children[i].status is not RunStatus.COMPLETED:
                    self._skip_rest(run, i)
                    break
        self._settler.settle_run(run, control.stop_reason)

    def _remember_env(self, run: Run, index: int, env: Mapping[str, str]) -> None:
        """A workflow child's environment values, for a later resume (see `_envs`)."""
        self._envs.setdefault(run.run_id, {})[index] = env

    def _forget_old(self, finished: Run) -> None:
        """Keep the newest finished runs in memory, without their events (each may
        hold MAX_EVENT_BYTES_KEPT: they are read from the store); older runs are
        read from the store altogether."""
        held = finished.events.bytes
        finished.events.release()
        heap.give_back(held)
        self._finished.append(finished.run_id)
        while len(self._finished) > FINISHED_KEPT_IN_MEMORY:
            self._drop(self._finished.popleft())

    def _drop(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
        self._controls.pop(run_id, None)
        self._envs.pop(run_id, None)
        self._workflows.forget(run_id)

    def forget(self, run_ids: Sequence[str]) -> None:
        """Forget runs the history deleted (pruned by `--history-limit`): -32001 from now on.

        A run that is live again here (resumed since the prune chose it) is kept:
        its next write records it anew.
        """
        for run_id in run_ids:
            run = self._runs.get(run_id)
            if run is None or not run.is_terminal:
                continue
            with contextlib.suppress(ValueError):
                self._finished.remove(run_id)
            self._drop(run_id)

    def _skip_rest(self, run: Run, failed_index: int) -> None:
        for later in run.children[failed_index + 1 :]:
            self._book.transition_child(
                run,
                later,
                RunStatus.CANCELLED,
                reason=f"not run: step {failed_index} did not complete",
            )

    async def _run_child(
        self, run: Run, index: int, plan: ChildPlan, previous: str | None, control: RunControl
    ) -> str | None:
        """Carry one child from queued to terminal; return its final text if it completed."""
        child = run.children[index]
        if not await self._take_slot(control):
            self._book.transition_child(run, child, RunStatus.CANCELLED, reason=control.stop_reason)
            return None
        try:
            return await self._run_started_child(run, child, plan, previous, control)
        finally:
            self._slots.release()

    def _run_workflow_child(
        self, run: Run, index: int, plan: ChildPlan, control: RunControl
    ) -> Awaitable[str | None]:
        """A workflow step's child: its templates are filled already, no `previous` is passed."""
        return self._run_child(run, index, plan, None, control)

    async def _take_slot(self, control: RunControl) -> bool:
        """Wait for a slot; False (holding none) if the run is stopped first."""
        if control.stopping.done():
            return False
        if self._slots.try_acquire():  # a free slot: no waiting, no extra turn of the loop
            return True
        acquiring = asyncio.ensure_future(self._slots.acquire())
        await asyncio.wait({acquiring, control.stopping}, return_when=asyncio.FIRST_COMPLETED)
        if acquiring.done() and not acquiring.cancelled() and acquiring.exception() is None:
            if not control.stopping.done():
                return True
            self._slots.release()
            return False
        acquiring.cancel()
        try:
            await acquiring
        except asyncio.CancelledError:
            return False
        self._slots.release()  # the slot came just as we gave up: hand it on
        return False

    async def _run_started_child(
        self, run: Run, child: ChildRun, plan: ChildPlan, previous: str | None, control: RunControl
    ) -> str | None:
        if control.stopping.done():
            self._book.transition_child(run, child, RunStatus.CANCELLED, reason=control.stop_reason)
            return None
        backend = self._backends[plan.backend]
        prompt = plan.prompt
        if prompt is not None and previous is not None:
            prompt = prompt.replace(
                PREVIOUS_PLACEHOLDER, templates.cap(previous, self._caps.previous_bytes)
            )
        if is_empty_prompt(plan.backend, prompt):  # a template filled with nothing
            message = (
                "the prompt is empty once its placeholders are filled: "
                f"the {plan.backend} CLI was not started"
            )
            self._book.transition_child(
                run, child, RunStatus.FAILED, error=ErrorInfo(EMPTY_PROMPT, message)
            )
            return None
        launch = backend.prepare(plan.item(prompt))
        env = child_environment(
            self._server_env,
            backend_allowed=backend.env_allowed,
            extra=launch.env,
            run_id=run.run_id,
            depth=self._depth,
        )
        parser = backend.parser()
        sink = ChildSink(
            parser,
            self._streamer(run, child, "output") if control.stream else None,
            self._activity_streamer(run, child, parser),
        )
        try:
            process = await self._supervisor.start(
                LaunchSpec(
                    argv=launch.argv,
                    cwd=launch.cwd,
                    env=env,
                    stdin=launch.stdin,
                    name=f"{run.run_id}-{child.index}-{child.attempt}",
                ),
                sink,
            )
        except OSError as exc:
            message = _start_failure(launch.argv[0], exc)
            self._book.transition_child(
                run, child, RunStatus.FAILED, error=ErrorInfo("spawn-failed", message)
            )
            return None
        self._book.transition_child(
            run,
            child,
            RunStatus.RUNNING,
            pid=process.pid,
            pgid=process.pgid,
            start_time_probe=process.create_time,
        )
        sink.open()
        self._sampler.watch(process, child)
        if control.stream:
            sink.throttle(process.hold_output, process.release_output)
            self.streams.join(sink)
        try:
            ending = await self._supervise(process, plan, sink, control)
            exit_status = await self._supervisor.wait(process)
        finally:
            self.streams.leave(sink)
            self._sampler.unwatch(process)
        # At its end: the tree's CPU (its cgroup's, else wait4's) and the processes the
        # stop sequence ended; every child gets resources.
        record_usage(child, process.usage, leftovers_ended=process.leftovers_ended)
        outcome = parser.outcome(exit_status)
        if self.sessions is not None and outcome.backend_session_id is not None:
            # The file a resume of this attempt would continue, as the attempt left it.
            seal = await asyncio.to_thread(
                self.sessions.seal, plan.backend, outcome.backend_session_id, SEALED_AT_END
            )
            child.session_digest = seal.digest if seal else None
            child.session_digest_source = seal.source if seal else None
        self._settler.settle_child(run, child, outcome, exit_status, process.stopped_by, ending)
        return outcome.final_text if child.status is RunStatus.COMPLETED else None

    async def _supervise(
        self, process: Child, plan: ChildPlan, sink: ChildSink, control: RunControl
    ) -> Ending | None:
        """Wait for whichever comes first: exit, stop, stall, timeout, turn limit. End the
        tree unless exit.

        Each is a callback settling one future (first wins): no task per watch.
        """
        loop = asyncio.get_running_loop()
        first: asyncio.Future[Ending | None] = loop.create_future()

        def settle(ending: Ending | None) -> None:
            if not first.done():
                first.set_result(ending)

        def on_exit(_: object) -> None:
            settle(None)

        def on_stop(_: object) -> None:
            settle(Ending(RunStatus.CANCELLED, control.stop_reason or "stopped"))

        process.exited.add_done_callback(on_exit)
        control.stopping.add_done_callback(on_stop)
        lingering: list[asyncio.TimerHandle] = []

        def on_finished() -> None:
            # The CLI printed its final event; one that does not exit soon is ended,
            # and its run is still reported by that event.
            lingering.append(loop.call_later(FINISHED_GRACE_S, settle, LINGERED))

        sink.on_finished = on_finished
        stall = sink.watch_stall(
            plan.stall_timeout_ms / 1000,
            lambda: settle(Ending(RunStatus.TIMED_OUT, "stall", plan.stall_timeout_ms)),
        )
        timeout = loop.call_later(
            plan.timeout_ms / 1000,
            settle,
            Ending(RunStatus.TIMED_OUT, "timeout", plan.timeout_ms),
        )
        if plan.max_turns is not None:
            sink.watch_turns(plan.max_turns, lambda: settle(MAX_TURNS))
        try:
            ending = await first
        finally:
            process.exited.remove_done_callback(on_exit)
            control.stopping.remove_done_callback(on_stop)
            stall.cancel()
            timeout.cancel()
            sink.unwatch_turns()
            sink.on_finished = None
            for timer in lingering:
                timer.cancel()
        if ending is None or process.exited.done():
            return None  # its own exit came first: whatever else happened lost the race
        if ending is LINGERED:
            logger.info("%r printed its final event but did not exit: ending it", process)
            await self._supervisor.stop(process, grace_s=LEFTOVER_GRACE_S)
            return None  # as if it had exited: its final event decides
        await self._supervisor.stop(process, grace_s=control.grace_s)
        return ending

    # --- output ----------------------------------------------------------------------

    def _streamer(self, run: Run, child: ChildRun, event_type: str) -> Callable[[str], None]:
        """Emit `output` or `activity` events of one child."""

        def stream(text: str) -> None:
            self._book.emit(run, event_type, index=child.index, text=text)

        return stream

    def _activity_streamer(
        self, run: Run, child: ChildRun, parser: OutputParser
    ) -> Callable[[str], None]:
        """Emit `activity` events; the CLI's session id goes with the first one's write, so
        a server that dies mid-attempt leaves a run a later one can still resume."""
        emit = self._streamer(run, child, "activity")

        def stream(text: str) -> None:
            if child.backend_session_id is None:
                child.backend_session_id = parser.session_id
            emit(text)

        return stream


def _start_failure(program: str, exc: OSError) -> str:
    """The `spawn-failed` message: which program, and why `exec` refused it."""
    shown = repr(program[:PROGRAM_SHOWN_CHARS]) + (
        "..." if len(program) > PROGRAM_SHOWN_CHARS else ""
    )
    message = f"cannot start {shown}: {exc.strerror or exc}"
    if exc.errno == errno.E2BIG:
        message += (
            " (one argument may hold at most 128 KiB, and all of them with the"
            " environment no more than the system's ARG_MAX)"
        )
    return message
