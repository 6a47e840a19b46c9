"""Carry runs out: schedule children under the server-wide limit, supervise each, settle one status.

A run is a plan of children (`single`, `parallel` tasks, a `chain` passing
`{previous}` on, or a `workflow`, whose steps `workflow_runner.py` carries
out). Each child waits its turn for a slot (`queued`), is started through its
backend and the supervisor (`running`), and ends in exactly one terminal status.
What ends it is decided in one place, `_supervise`: the child's own exit, a
stop request, its timeout, or a stall — the first of them wins, and the state
machine refuses any later status.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from subagent_host.backends.base import Backend, Outcome, OutputParser
from subagent_host.backends.environment import child_environment
from subagent_host.backends.output import TRUNCATION_MARKER, cap_text
from subagent_host.backends.supervisor import (
    Child,
    ExitStatus,
    LaunchSpec,
    Supervisor,
    TreeUsage,
)
from subagent_host.runs.plans import ChildPlan, RunPlan, plan_fingerprint
from subagent_host.runs.projection import project
from subagent_host.runs.scheduler import Slots
from subagent_host.runs.state import (
    ChildRun,
    ErrorInfo,
    OutputInfo,
    Resources,
    Run,
    RunBook,
    RunKind,
    RunStatus,
)
from subagent_host.runs.workflow_runner import WORKFLOW_PARALLELISM, WorkflowRunner, initial_state

logger = logging.getLogger(__name__)

PREVIOUS_PLACEHOLDER: Final = "{previous}"
PREVIOUS_MARKER: Final = "[previous output truncated]"
# Resource sampling walks the child's tree with psutil: often enough to see a
# peak that lasts a second, rarely enough to cost nothing noticeable.
RESOURCE_SAMPLE_S: Final = 1.0
# How long an agent CLI may take to exit after printing its final event.
FINISHED_GRACE_S: Final = 5.0
# ... and how long it then gets to go on SIGTERM.
LEFTOVER_GRACE_S: Final = 1.0
# Finished runs stay in memory for quick reads; older ones are read from the store.
FINISHED_KEPT_IN_MEMORY: Final = 1_000
# A stop returns once the tree is gone: the grace, then SIGKILL's own bound.
STOP_SETTLE_MARGIN_S: Final = 30.0


@attrs.frozen
class OutputCaps:
    """CONTRACT §3 caps: one child's text, and each child's inside a parallel summary."""

    bytes: int
    lines: int
    parallel_bytes: int
    parallel_lines: int
    previous_bytes: int


def _new_future() -> asyncio.Future[None]:
    return asyncio.get_running_loop().create_future()


async def _no_snapshot(_run: Run, _path: str) -> None:
    return None


@attrs.frozen
class WorkflowRecords:
    """Where a workflow's definition, its children's texts and its snapshot file go."""

    definition: Callable[[Run, RunPlan], None] = lambda _run, _plan: None
    child_added: Callable[[Run, int, dict[str, Any]], None] = lambda _run, _i, _p: None
    text: Callable[[Run, int, str], None] = lambda _run, _i, _t: None
    snapshot: Callable[[Run, str], Awaitable[None]] = _no_snapshot
    """Rewrite the workflow's `snapshotPath` with the run as it is now."""


@attrs.define
class _Control:
    """A run's stop request (first wins) and its completion."""

    grace_s: float
    stream: bool = False
    stop_reason: str | None = None
    stopping: asyncio.Future[None] = attrs.Factory(
        lambda: asyncio.get_running_loop().create_future()
    )
    """Done once a stop was requested (never cancelled)."""
    done: asyncio.Event = attrs.Factory(asyncio.Event)
    task: asyncio.Task[None] | None = None


@attrs.frozen
class _Ending:
    """Why a running child ended, when it was not its own exit."""

    status: RunStatus
    reason: str
    enforced_timeout_ms: int | None = None


# An agent CLI that printed its final event and then did not exit.
LINGERED: Final = _Ending(RunStatus.COMPLETED, "lingered after its final event")


class _ChildSink:
    """The supervisor's output sink for one child: feeds the parser, notes activity, streams."""

    def __init__(
        self,
        parser: OutputParser,
        stream: Callable[[str], None] | None,
        report_activity: Callable[[str], None],
    ) -> None:
        self.parser = parser
        self._stream = stream
        self._report_activity = report_activity
        self._loop = asyncio.get_running_loop()
        self.last_active = self._loop.time()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        # Output can arrive before the child is marked running; its events wait.
        self._held: list[Callable[[], None]] | None = []
        self.on_finished: Callable[[], None] | None = None
        """Called once, when the parser has seen the CLI's final event."""

    def open(self) -> None:
        """The child is marked running: send the events held so far, then send at once."""
        held, self._held = self._held or [], None
        for send in held:
            send()

    def _send(self, deliver: Callable[[str], None], text: str) -> None:
        if self._held is None:
            deliver(text)
        else:
            self._held.append(lambda: deliver(text))

    def on_stdout(self, data: bytes) -> None:
        self.parser.on_stdout(data)
        self.last_active = self._loop.time()
        for summary in self.parser.activity():
            self._send(self._report_activity, summary)
        if self.on_finished is not None and self.parser.finished:
            finished, self.on_finished = self.on_finished, None
            finished()
        if self._stream is not None:
            text = self._decoder.decode(data)  # a character split across reads stays whole
            if text:
                self._send(self._stream, text)

    def on_stderr(self, data: bytes) -> None:
        self.parser.on_stderr(data)
        self.last_active = self._loop.time()

    def watch_stall(self, stall_s: float, on_stall: Callable[[], None]) -> _StallWatch:
        """Call `on_stall` once no output arrived for `stall_s` seconds."""
        return _StallWatch(self, stall_s, on_stall)


class _StallWatch:
    """A timer re-armed for the remaining quiet time: it wakes once per stall
    period, not once per chunk of output."""

    def __init__(self, sink: _ChildSink, stall_s: float, on_stall: Callable[[], None]) -> None:
        self._sink = sink
        self._stall_s = stall_s
        self._on_stall = on_stall
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(stall_s, self._check)

    def _check(self) -> None:
        if getattr(self._sink.parser, "tool_running", False):
            # An agent's tool is running (agent CLIs print nothing meanwhile): that is
            # work, not a stall. The run's timeout still bounds it.
            self._sink.last_active = self._loop.time()
        remaining = self._sink.last_active + self._stall_s - self._loop.time()
        if remaining <= 0:
            self._on_stall()
        else:
            self._timer = self._loop.call_later(remaining, self._check)

    def cancel(self) -> None:
        self._timer.cancel()


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
    ) -> None:
        self._supervisor = supervisor
        self._backends = backends
        self._slots = slots
        self._book = book
        self._caps = caps
        self._server_env = dict(server_env)
        self._depth = depth
        self._grace_s = grace_ms / 1000
        self._new_run_id = new_run_id
        self._on_launch = on_launch
        self._workflow_records = workflow_records or WorkflowRecords()
        self._workflow_parallelism = workflow_parallelism
        self._workflows: dict[str, WorkflowRunner] = {}
        self._runs: dict[str, Run] = {}
        # Each child's environment values, by run: never stored, so a resume of
        # a child launched with `env` works only while this server remembers them.
        self._envs: dict[str, dict[int, Mapping[str, str]]] = {}  # by run id, then child index
        self._finished: collections.deque[str] = collections.deque()
        self._controls: dict[str, _Control] = {}
        self._timeouts: dict[str, int] = {}  # run id -> the timeout that ended it
        self._limits: dict[str, str] = {}  # run id -> the CLI's limit that stopped it
        self._sampled: dict[int, tuple[Child, ChildRun]] = {}  # running children by pid
        self._sampler: asyncio.Task[None] | None = None

    # --- queries ---------------------------------------------------------------------

    def get(self, run_id: str) -> Run | None:
        return self._runs.get(run_id)

    def live(self) -> list[Run]:
        """Runs of this server that are not terminal yet."""
        return [run for run in self._runs.values() if not run.is_terminal]

    # --- commands --------------------------------------------------------------------

    def launch(self, plan: RunPlan, session_id: str) -> Run:
        """Create the run (queued) and start carrying it out in the background."""
        run = Run(
            run_id=self._new_run_id(),
            session_id=session_id,
            kind=plan.kind,
            fingerprint=plan_fingerprint(plan, self._backends, plan.access),
            created_at=self._book.now(),
            label=plan.label,
            children=[
                ChildRun(index=i, backend=child.backend, label=child.label)
                for i, child in enumerate(plan.children)
            ],
        )
        if plan.workflow is not None:  # its children are made step by step
            run.children = []
            run.workflow = initial_state(plan.workflow)
            self._workflows[run.run_id] = self._workflow_runner(run, plan)
        self._runs[run.run_id] = run
        self._envs[run.run_id] = {c.index: plan.children[c.index].env for c in run.children}
        control = _Control(grace_s=self._grace_s, stream=plan.stream)
        self._controls[run.run_id] = control
        # Running from the start: its children wait for slots, the run does not.
        self._book.transition(run, RunStatus.RUNNING)
        if self._on_launch is not None:
            self._on_launch(
                run,
                [
                    project(child, self._backends[child.backend])
                    for child in plan.children[: len(run.children)]
                ],
            )
        if plan.workflow is not None:
            self._workflow_records.definition(run, plan)
        control.task = asyncio.create_task(self._execute(run, plan, control))
        return run

    def _workflow_runner(
        self, run: Run, plan: RunPlan, texts: Mapping[int, str] | None = None
    ) -> WorkflowRunner:
        return WorkflowRunner(
            run=run,
            plan=plan,
            host=_WorkflowHost(self),
            previous_cap=self._caps.previous_bytes,
            texts=dict(texts or {}),
            parallelism=self._workflow_parallelism,
        )

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
            self._workflows[run.run_id] = self._workflow_runner(run, *workflow)
        control = _Control(grace_s=self._grace_s, stream=stream)
        self._controls[run.run_id] = control
        self._book.reopen(run)
        control.task = asyncio.create_task(self._execute_resume(run, index, plan, control))
        return run

    async def _execute_resume(
        self, run: Run, index: int, plan: ChildPlan, control: _Control
    ) -> None:
        try:
            text = await self._run_child(run, index, plan, None, control)
            runner = self._workflows.get(run.run_id)
            if runner is None:
                self._settle(run, control)
            else:
                if text is not None:
                    runner.keep(index, text)
                await runner.resumed(index, control)
                await self._write_snapshot(run)
        except Exception as exc:  # a bug of ours: the run still gets a truthful end
            logger.exception("resume of run %s failed internally", run.run_id)
            self._book.transition(
                run,
                RunStatus.FAILED,
                error=ErrorInfo("internal", f"internal error ({type(exc).__name__})"),
            )
        finally:
            control.done.set()
            self._forget_old(run)

    async def wait(self, run: Run) -> None:
        """Return once the run is terminal."""
        control = self._controls.get(run.run_id)
        if control is not None:
            await control.done.wait()

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

    async def shutdown(self, reason: str) -> None:
        """Stop every run that is not terminal yet (client gone, or server stopping)."""
        live = [run for run in self._runs.values() if not run.is_terminal]
        await asyncio.gather(
            *(self.stop(run, grace_ms=None, reason=reason) for run in live),
            return_exceptions=True,
        )

    # --- carrying a run out ----------------------------------------------------------

    async def _execute(self, run: Run, plan: RunPlan, control: _Control) -> None:
        try:
            runner = self._workflows.get(run.run_id)
            if runner is not None:
                await runner.run_from(0, control)
                await self._write_snapshot(run)
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
            self._settle(run, control)
        except Exception as exc:  # a bug of ours: the run still gets a truthful end
            logger.exception("run %s failed internally", run.run_id)
            self._book.transition(
                run,
                RunStatus.FAILED,
                error=ErrorInfo("internal", f"internal error ({type(exc).__name__})"),
            )
        finally:
            control.done.set()
            self._forget_old(run)

    def _add_child(self, run: Run, plan: ChildPlan, step: int) -> ChildRun:
        """A workflow step's new child: queued, its projection recorded, its env remembered."""
        child = ChildRun(index=len(run.children), backend=plan.backend, label=plan.label, step=step)
        run.children.append(child)
        self._envs.setdefault(run.run_id, {})[child.index] = plan.env
        self._workflow_records.child_added(
            run, child.index, project(plan, self._backends[plan.backend])
        )
        self._book.emit(run, "child", index=child.index, status=str(child.status))
        return child

    async def _write_snapshot(self, run: Run) -> None:
        runner = self._workflows.get(run.run_id)
        path = runner.workflow.snapshot_path if runner is not None else None
        if path is None:
            return
        try:
            await self._workflow_records.snapshot(run, path)
        except OSError as exc:  # the run goes on; the file is only a convenience
            logger.warning("cannot write the snapshot of run %s to %s: %s", run.run_id, path, exc)

    def _forget_old(self, finished: Run) -> None:
        """Keep the newest finished runs in memory; the rest are read from the store."""
        self._finished.append(finished.run_id)
        while len(self._finished) > FINISHED_KEPT_IN_MEMORY:
            run_id = self._finished.popleft()
            self._runs.pop(run_id, None)
            self._controls.pop(run_id, None)
            self._envs.pop(run_id, None)
            self._workflows.pop(run_id, None)

    def _skip_rest(self, run: Run, failed_index: int) -> None:
        for later in run.children[failed_index + 1 :]:
            self._book.transition_child(
                run,
                later,
                RunStatus.CANCELLED,
                reason=f"not run: step {failed_index} did not complete",
            )

    async def _run_child(
        self, run: Run, index: int, plan: ChildPlan, previous: str | None, control: _Control
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

    async def _take_slot(self, control: _Control) -> bool:
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
        self, run: Run, child: ChildRun, plan: ChildPlan, previous: str | None, control: _Control
    ) -> str | None:
        if control.stopping.done():
            self._book.transition_child(run, child, RunStatus.CANCELLED, reason=control.stop_reason)
            return None
        backend = self._backends[plan.backend]
        prompt = plan.prompt
        if prompt is not None and previous is not None:
            prompt = prompt.replace(PREVIOUS_PLACEHOLDER, self._cap_previous(previous))
        launch = backend.prepare(plan.item(prompt))
        env = child_environment(
            self._server_env,
            backend_allowed=backend.env_allowed,
            extra=launch.env,
            run_id=run.run_id,
            depth=self._depth,
        )
        parser = backend.parser()
        sink = _ChildSink(
            parser,
            self._streamer(run, child, "output") if control.stream else None,
            self._streamer(run, child, "activity"),
        )
        try:
            process = await self._supervisor.start(
                LaunchSpec(argv=launch.argv, cwd=launch.cwd, env=env, stdin=launch.stdin), sink
            )
        except OSError as exc:
            message = f"cannot start {launch.argv[0]!r}: {exc.strerror or exc}"
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
        self._sampled[process.pid] = (process, child)
        self._start_sampling()
        try:
            ending = await self._supervise(process, plan, sink, control)
            exit_status = await self._supervisor.wait(process)
        finally:
            self._sampled.pop(process.pid, None)
        if process.usage is not None:  # its own, from wait4: every child gets resources
            _record_usage(child, process.usage)
        outcome = parser.outcome(exit_status)
        self._settle_child(run, child, outcome, exit_status, ending)
        return outcome.final_text if child.status is RunStatus.COMPLETED else None

    def _start_sampling(self) -> None:
        if self._sampler is None or self._sampler.done():
            self._sampler = asyncio.create_task(self._sample_running())

    async def _sample_running(self) -> None:
        """Every `RESOURCE_SAMPLE_S`, sample the trees of all running children in one sweep."""
        while self._sampled:
            # The sampling interval is the point of this wait; nothing else can end it.
            await asyncio.sleep(RESOURCE_SAMPLE_S)  # noqa: ASYNC110
            running = dict(self._sampled)
            usages = await self._supervisor.sample([p for p, _ in running.values()], trees=True)
            for pid, usage in usages.items():
                if pid in self._sampled:
                    _record_usage(running[pid][1], usage)

    async def _supervise(
        self, process: Child, plan: ChildPlan, sink: _ChildSink, control: _Control
    ) -> _Ending | None:
        """Wait for whichever comes first: exit, stop, stall, timeout. End the tree unless exit.

        Each is a callback settling one future (first wins): no task per watch.
        """
        loop = asyncio.get_running_loop()
        first: asyncio.Future[_Ending | None] = loop.create_future()

        def settle(ending: _Ending | None) -> None:
            if not first.done():
                first.set_result(ending)

        def on_exit(_: object) -> None:
            settle(None)

        def on_stop(_: object) -> None:
            settle(_Ending(RunStatus.CANCELLED, control.stop_reason or "stopped"))

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
            lambda: settle(_Ending(RunStatus.TIMED_OUT, "stall", plan.stall_timeout_ms)),
        )
        timeout = loop.call_later(
            plan.timeout_ms / 1000,
            settle,
            _Ending(RunStatus.TIMED_OUT, "timeout", plan.timeout_ms),
        )
        try:
            ending = await first
        finally:
            process.exited.remove_done_callback(on_exit)
            control.stopping.remove_done_callback(on_stop)
            stall.cancel()
            timeout.cancel()
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

    def _settle_child(
        self,
        run: Run,
        child: ChildRun,
        outcome: Outcome,
        exit_status: ExitStatus,
        ending: _Ending | None,
    ) -> None:
        completed = ending is None and outcome.completed
        output = self._output_of(run, outcome, partial=not completed)
        facts: dict[str, object] = {
            "exit_code": exit_status.exit_code,
            "signal": exit_status.signal,
            "output": output,
            "usage": outcome.usage,
            "backend_session_id": outcome.backend_session_id,
        }
        if completed:
            self._book.transition_child(run, child, RunStatus.COMPLETED, **facts)
        elif ending is not None:
            self._book.transition_child(run, child, ending.status, reason=ending.reason, **facts)
            child_timeout = ending.enforced_timeout_ms
            if child_timeout is not None:
                self._timeouts[run.run_id] = child_timeout
        elif outcome.reached_limit is not None:  # the CLI stopped at a limit of its own
            self._book.transition_child(run, child, RunStatus.LIMIT_REACHED, **facts)
            self._limits[run.run_id] = outcome.reached_limit
        else:
            error = ErrorInfo(
                outcome.error_code or "failed",
                outcome.error_message or "failed",
                outcome.error_data,
            )
            self._book.transition_child(run, child, RunStatus.FAILED, error=error, **facts)

    def _settle(self, run: Run, control: _Control) -> None:
        """The run's one terminal status, from its children's."""
        unfinished = [c for c in run.children if c.status is not RunStatus.COMPLETED]
        output: OutputInfo | None
        if run.kind is RunKind.PARALLEL:
            output = self._parallel_summary(run, partial=bool(unfinished))
        else:
            last = unfinished[0] if unfinished else run.children[-1]
            output = last.output
        self._settle_from(run, control, unfinished, output)

    def _settle_from(
        self,
        run: Run,
        control: _Control,
        unfinished: Sequence[ChildRun],
        output: OutputInfo | None,
    ) -> None:
        """Settle from the children that did not complete (none: the run completed)."""
        if not unfinished:
            self._book.transition(run, RunStatus.COMPLETED, output=output)
            return
        first = unfinished[0]
        if first.status is RunStatus.FAILED and first.error is not None:
            error = first.error
            if run.kind is not RunKind.SINGLE:
                data = {"index": first.index, **(error.data or {})}
                error = ErrorInfo(error.code, f"child {first.index}: {error.message}", data)
            self._book.transition(run, RunStatus.FAILED, error=error, output=output)
        elif first.status is RunStatus.LIMIT_REACHED:
            self._book.transition(
                run,
                RunStatus.LIMIT_REACHED,
                reached_limit=self._limits.pop(run.run_id, "limit"),
                output=output,
            )
        elif first.status is RunStatus.TIMED_OUT:
            self._book.transition(
                run,
                RunStatus.TIMED_OUT,
                reason=first.reason,
                enforced_timeout_ms=self._timeouts.pop(run.run_id, None),
                output=output,
            )
        else:
            self._book.transition(
                run,
                RunStatus.CANCELLED,
                reason=control.stop_reason or first.reason or "stopped",
                output=output,
            )

    def _settle_workflow(
        self,
        run: Run,
        control: _Control,
        children: Sequence[ChildRun],
        last_text: str | None,
    ) -> None:
        """A workflow's end: its last step's text, or the first step that did not complete."""
        unfinished = [c for c in children if c.status is not RunStatus.COMPLETED]
        if not unfinished and last_text is not None:
            self._book.transition(
                run, RunStatus.COMPLETED, output=self._text_output(last_text, partial=False)
            )
            return
        if not unfinished:  # a step that never started: the run was stopped before it
            self._book.transition(run, RunStatus.CANCELLED, reason=control.stop_reason or "stopped")
            return
        self._settle_from(run, control, unfinished, unfinished[0].output)

    def _text_output(self, text: str, *, partial: bool) -> OutputInfo:
        capped = cap_text(text, self._caps.bytes, self._caps.lines)
        data = text.encode()
        return OutputInfo(
            text=capped.text,
            truncated=capped.truncated,
            bytes=len(data),
            lines=text.count("\n") + (0 if text.endswith("\n") or not text else 1),
            partial=partial,
        )

    # --- output ----------------------------------------------------------------------

    def _output_of(self, run: Run, outcome: Outcome, *, partial: bool) -> OutputInfo:
        parallel = run.kind is RunKind.PARALLEL
        cap_bytes = self._caps.parallel_bytes if parallel else self._caps.bytes
        cap_lines = self._caps.parallel_lines if parallel else self._caps.lines
        capped = cap_text(outcome.final_text, cap_bytes, cap_lines)
        truncated = capped.truncated or outcome.final_bytes > len(outcome.final_text.encode())
        text = capped.text
        if truncated and not capped.truncated:
            text = text + ("" if text.endswith("\n") or not text else "\n") + TRUNCATION_MARKER
        return OutputInfo(
            text=text,
            truncated=truncated,
            bytes=outcome.final_bytes,
            lines=outcome.final_lines,
            partial=partial,
        )

    def _parallel_summary(self, run: Run, *, partial: bool) -> OutputInfo:
        parts = []
        for child in run.children:
            title = f"[{child.index}]" + (f" {child.label}" if child.label else "")
            body = child.output.text if child.output else ""
            parts.append(f"{title} {child.status}\n{body}".rstrip("\n"))
        text = "\n\n".join(parts) + "\n"
        size = len(text.encode())
        return OutputInfo(
            text=text,
            truncated=any(c.output is not None and c.output.truncated for c in run.children),
            bytes=size,
            lines=text.count("\n"),
            partial=partial,
        )

    def _streamer(self, run: Run, child: ChildRun, event_type: str) -> Callable[[str], None]:
        """Emit `output` or `activity` events of one child."""

        def stream(text: str) -> None:
            self._book.emit(run, event_type, index=child.index, text=text)

        return stream

    def _cap_previous(self, text: str) -> str:
        data = text.encode("utf-8")
        if len(data) <= self._caps.previous_bytes:
            return text
        head = data[: self._caps.previous_bytes].decode("utf-8", "ignore")
        return head + "\n" + PREVIOUS_MARKER


def _record_usage(child: ChildRun, usage: TreeUsage) -> None:
    """Fold a sample into the child's resources: CPU so far, peak memory, peak process count."""
    before = child.resources
    child.resources = Resources(
        cpu_seconds=round(max(usage.cpu_seconds, before.cpu_seconds if before else 0.0), 3),
        peak_rss_bytes=max(usage.rss_bytes, before.peak_rss_bytes if before else 0),
        processes=max(usage.processes, before.processes if before else 0),
    )


class _WorkflowHost:
    """The run manager as a workflow runner sees it."""

    def __init__(self, manager: RunManager) -> None:
        self._manager = manager

    def new_child(self, run: Run, plan: ChildPlan, step: int) -> ChildRun:
        return self._manager._add_child(run, plan, step)

    def run_child(
        self, run: Run, index: int, plan: ChildPlan, control: Any
    ) -> Awaitable[str | None]:
        return self._manager._run_child(run, index, plan, None, control)

    def keep_text(self, run: Run, index: int, text: str) -> None:
        self._manager._workflow_records.text(run, index, text)

    async def step_ended(self, run: Run) -> None:
        await self._manager._write_snapshot(run)

    def settle(
        self, run: Run, control: Any, children: Sequence[ChildRun], last_text: str | None
    ) -> None:
        self._manager._settle_workflow(run, control, children, last_text)

    def fail(self, run: Run, error: ErrorInfo) -> None:
        self._manager._book.transition(run, RunStatus.FAILED, error=error)
