"""Carry one child from queued to terminal: slot -> start -> supervise -> settle.

Every child of every run kind (`single`, `parallel` tasks, a `chain`, a
workflow's steps) and every resumed attempt goes this one way. The child waits
for a server-wide slot (`queued`), is prepared by its backend and started by
its executor (`running`; executors/: here, or on a cluster), and ends in exactly
one terminal status. What ends it is decided in one place, `_supervise`: its
own exit, a stop request, its timeout, a stall, its turn limit (`maxTurns`,
counted from the CLI's events) or its budget (`maxTokens`, `maxCostUsd`, summed
from them) — the first of them wins, and the run state machine refuses any later status.
Nothing the child started outlives it: its handle's `wait` (executors/base.py
`ChildHandle`) returns only once its tree is gone, and a bug of ours while it
runs ends the tree too.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from typing import Final

import attrs

from subagent_host.backends.base import OutputParser, ParsedOutcome
from subagent_host.backends.budgets import MAX_COST_LIMIT, MAX_TOKENS_LIMIT, Budget
from subagent_host.backends.environment import allowed_environment, child_environment
from subagent_host.backends.events import AgentEvent
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.helper_runner import HelperRunner
from subagent_host.backends.interactive.driven_output import DrivenOutput
from subagent_host.backends.interactive.drivers import driver_for
from subagent_host.backends.redaction import Redaction
from subagent_host.backends.reports import start_failure
from subagent_host.backends.sessions import SEALED_AT_END
from subagent_host.backends.supervisor import LEFTOVER_GRACE_S, LaunchSpec
from subagent_host.executors.base import ChildHandle, ChildLost, Executor
from subagent_host.executors.local import LocalExecutor
from subagent_host.planning import templates
from subagent_host.planning.plan import (
    EMPTY_PROMPT,
    ChildPlan,
    is_driven,
    is_empty_prompt,
    render_launch,
)
from subagent_host.runs.child_sink import (
    ChildSink,
    EventSender,
    RawEvent,
    RawSender,
    StreamGate,
    agent_event,
)
from subagent_host.runs.endings import ChildCancelled, ChildExit, ChildFailed
from subagent_host.runs.live_child import CLOSED, IDLE, MAX_TURNS, LiveChild, named_tools
from subagent_host.runs.live_requests import drop_early
from subagent_host.runs.outputs import PREVIOUS_PLACEHOLDER
from subagent_host.runs.run_control import RunControl
from subagent_host.runs.sampling import ResourceSampler, record_usage
from subagent_host.runs.services import ChildServices
from subagent_host.runs.settling import Settler, StopCause
from subagent_host.runs.state import ChildRun, Run, RunStatus
from subagent_host.values import WORKTREE
from subagent_host.values.events import ActivityEvent
from subagent_host.values.facts import ErrorInfo, Usage
from subagent_host.workspaces.worktrees import (
    CWD_OUTSIDE_WORKTREE,
    Git,
    GitFailed,
    Opened,
    OutsideWorktree,
    Worktrees,
    reopened,
    unmeasured,
)

logger = logging.getLogger(__name__)

# How long an agent CLI may take to exit after printing its final event; it then
# gets the supervisor's LEFTOVER_GRACE_S to go on SIGTERM.
FINISHED_GRACE_S: Final = 5.0
# How long a stopped or timed-out ACP child's cancelled turn may take to end before its
# tree is ended anyway (never longer than the stop's own grace).
CANCEL_WAIT_S: Final = 2.0
# A resumed isolated child whose worktree was removed since its last attempt.
WORKSPACE_GONE: Final = "workspace-gone"
# An isolated child whose worktree could not be made (git failed, or no state directory).
WORKSPACE_FAILED: Final = "workspace-failed"
# An agent CLI whose model did not answer (the error code its parser also gives).
AGENT_ERROR: Final = "agent-error"
# An agent CLI that printed its final event and then did not exit.
LINGERED: Final = StopCause(RunStatus.COMPLETED, "lingered after its final event")

# An agent CLI whose reported usage reached its `maxTokens` or `maxCostUsd`, by limit.
BUDGET_SPENT: Final = {
    limit: StopCause(RunStatus.LIMIT_REACHED, limit, reached_limit=limit)
    for limit in (MAX_TOKENS_LIMIT, MAX_COST_LIMIT)
}


class StoppedBeforeStart(Exception):
    """The run was stopped while its child waited for somewhere to run."""


def internal_error(exc: BaseException) -> ErrorInfo:
    """A bug of ours, as the `failed` child or run it ended reports it (no traceback)."""
    return ErrorInfo("internal", f"internal error ({type(exc).__name__})")


class ChildRunner:
    """Runs children for every run of this server; keeps what a later attempt needs."""

    def __init__(self, services: ChildServices, settler: Settler) -> None:
        self._executor: Executor = services.executor or LocalExecutor(services.supervisor)
        self._backends = services.backends
        self._slots = services.slots
        self._state_machine = services.state_machine
        self._settler = settler
        self._caps = services.caps
        self._server_env = dict(services.server_env)
        self._depth = services.depth
        self.worktrees = (
            Worktrees(services.worktrees, Git(HelperRunner(services.supervisor)))
            if services.worktrees is not None
            else None
        )
        """Where isolated children work (None: no state directory, none can run)."""
        self.sessions = services.sessions
        """The agent CLIs' session files: sealed when an attempt ends, checked on resume."""
        # Each child's environment values, by run: never stored, so a resume of a
        # child launched with `env` works only while this server remembers them.
        self._envs: dict[str, dict[int, Mapping[str, str]]] = {}  # by run id, then child index
        self._sampler = ResourceSampler(services.supervisor)
        self.streams = StreamGate()
        """Closed while the client's outgoing queue is full (app.py): streamed
        children are then held back; others are not (their output is not queued)."""

    # --- the environment values a later attempt needs ------------------------------

    def remember_env(self, run: Run, index: int, env: Mapping[str, str]) -> None:
        """A child's `env` values, for a resume of it (see `_envs`)."""
        self._envs.setdefault(run.run_id, {})[index] = env

    def env_of(self, run_id: str, index: int) -> Mapping[str, str] | None:
        """The environment values a child was launched with, if this server still has them."""
        return self._envs.get(run_id, {}).get(index)

    def cli_environment(self, backend: str, run_id: str, index: int) -> dict[str, str]:
        """What a new attempt of the child would see of where its CLI keeps its files
        (without the run markers): the server's allowed variables, then its `env`."""
        env = allowed_environment(self._server_env, self._backends[backend].env_allowed)
        env.update(self.env_of(run_id, index) or {})
        return env

    def forget(self, run_id: str) -> None:
        self._envs.pop(run_id, None)

    # --- one child -------------------------------------------------------------------

    async def run(
        self,
        run: Run,
        index: int,
        plan: ChildPlan,
        control: RunControl,
        previous: str | None = None,
    ) -> str | None:
        """Carry one child from queued to terminal; return its final text if it completed.

        `previous` fills the prompt's `{previous}` (a chain's earlier child's text).
        """
        child = run.children[index]
        try:
            if not await self._take_slot(control):
                self._state_machine.transition_child(run, child, _not_started(control))
                return None
            try:
                return await self._start(run, child, plan, previous, control)
            finally:
                self._slots.release()
        finally:
            # Messages sent before it started, when it never did (its start took them).
            drop_early(run, control, index, self._state_machine.emit)

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

    async def _start(
        self, run: Run, child: ChildRun, plan: ChildPlan, previous: str | None, control: RunControl
    ) -> str | None:
        """Prepare and start the child (it holds a slot), then see it to its end."""
        if control.stopping.done():
            self._state_machine.transition_child(run, child, _not_started(control))
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
            self._state_machine.transition_child(
                run, child, ChildFailed(ErrorInfo(EMPTY_PROMPT, message))
            )
            return None
        # Prepared when planned; rendered again only when `{previous}` changed the prompt.
        launch = (
            plan.launch
            if prompt == plan.prompt and plan.launch
            else render_launch(plan, backend, prompt)
        )
        opened: Opened | None = None
        if plan.isolation == WORKTREE:
            try:
                opened = await self._open_workspace(run, child, plan.cwd)
            except GitFailed as exc:
                error = ErrorInfo(_workspace_error(child, exc), str(exc))
                self._state_machine.transition_child(run, child, ChildFailed(error))
                return None
            launch = attrs.evolve(launch, cwd=opened.cwd)
        driven = is_driven(plan, backend)
        env = child_environment(
            self._server_env,
            backend_allowed=backend.env_allowed,
            extra=launch.env,
            run_id=run.run_id,
            depth=self._depth,
        )
        parser: OutputParser
        if driven:  # its stdout is its conversation's (a command's is its own too)
            driver = driver_for(backend)
            # It speaks of the directory it runs in: an isolated child's worktree (an ACP
            # agent's `session/new {cwd}` decides where its tools act). It knows the names
            # of the variables the child gets, never their values (ACP's `authenticate`).
            item = attrs.evolve(plan.item(prompt), cwd=launch.cwd, env_names=frozenset(env))
            conversation = driver.conversation(item, plan.approvals)
            inner = backend.parser() if plan.command is not None else None
            parser = DrivenOutput(plan.backend, conversation, inner)
        else:
            parser = backend.parser()
        # A command's output is what it says; an agent's raw lines are sent only when
        # asked (`stream: "raw"`): its normalized events say what it does. Its stderr
        # goes with its stdout (`stderr` events).
        raw = control.stream and (plan.command is not None or control.raw_output)
        sink = ChildSink(
            parser,
            self._raw_streamer(run, child) if raw else None,
            self._activity_streamer(run, child, parser),
            self._event_streamer(run, child) if control.stream else None,
            # The values of the secrets it was given, whatever the request says.
            Redaction.of(env, base64=plan.redact),
        )
        live = (
            LiveChild(
                run,
                child,
                plan,
                parser,
                sink,
                self._state_machine,
                named_tools(backend),
                cancels_first=backend.cancels_turn_first,
            )
            if isinstance(parser, DrivenOutput)
            else None
        )
        try:
            process = await self._start_process(
                control,
                LaunchSpec(
                    argv=launch.argv,
                    cwd=launch.cwd,
                    env=env,
                    stdin=launch.stdin,
                    keep_stdin=live is not None,
                    name=f"{run.run_id}-{child.index}-{child.attempt}",
                    log_fields={"runId": run.run_id, "index": child.index},
                    placement=plan.placement,
                    # A child waits for a node no longer than it may run.
                    placement_wait_s=plan.timeout_ms / 1000,
                ),
                sink,
            )
        except StoppedBeforeStart:  # it waited for somewhere to run, and its run was stopped
            await self._settle_workspace(child, opened)
            self._state_machine.transition_child(run, child, _not_started(control))
            return None
        except ChildLost as lost:  # it never ran where its executor sent it
            await self._settle_workspace(child, opened)
            self._state_machine.transition_child(
                run, child, ChildFailed(ErrorInfo(lost.code, lost.message))
            )
            return None
        except OSError as exc:
            message = start_failure(launch.argv[0], exc)
            await self._settle_workspace(child, opened)
            self._state_machine.transition_child(
                run, child, ChildFailed(ErrorInfo("spawn-failed", message))
            )
            return None
        try:
            return await self._see_through(
                run, child, plan, control, process, parser, sink, opened, live, prompt
            )
        except Exception as exc:  # a bug of ours: the child still ends once, and says how
            # and what it used, as far as that is known.
            record_usage(child, process.usage, leftovers_ended=process.leftovers_ended)
            exit_ = _exit_facts(process, child, usage=_reported_usage(parser))
            self._state_machine.transition_child(
                run, child, ChildFailed(internal_error(exc), exit=exit_)
            )
            raise

    async def _start_process(
        self, control: RunControl, spec: LaunchSpec, sink: ChildSink
    ) -> ChildHandle:
        """Start the child; a start that may wait (for a cluster's node) gives way to a
        stop of its run (StoppedBeforeStart), and is then called off."""
        if self._executor.starts_at_once:  # no extra task on a local child's path
            return await self._executor.start(spec, sink)
        starting = asyncio.ensure_future(self._executor.start(spec, sink))
        either: set[asyncio.Future[ChildHandle] | asyncio.Future[None]] = {
            starting,
            control.stopping,
        }
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()  # the executor calls off whatever it had begun
        try:
            return await starting
        except asyncio.CancelledError:
            if not control.stopping.done():
                raise  # it is this task that is being cancelled
            raise StoppedBeforeStart from None

    async def _see_through(
        self,
        run: Run,
        child: ChildRun,
        plan: ChildPlan,
        control: RunControl,
        process: ChildHandle,
        parser: OutputParser,
        sink: ChildSink,
        opened: Opened | None,
        live: LiveChild | None = None,
        prompt: str | None = None,
    ) -> str | None:
        """The started child: running, supervised until it ends, then settled."""
        self._state_machine.start_child(
            run,
            child,
            pid=process.pid,
            pgid=process.pgid,
            node=process.node,
            start_time_probe=process.create_time,
        )
        sink.open()
        self._sampler.watch(process, child, parser)
        if control.stream:
            sink.throttle(process.hold_output, process.release_output)
            self.streams.join(sink)
        if live is not None:
            control.live[child.index] = live
            live.start(process, prompt, control.early.pop(child.index, ()))
        try:
            cause, exit_status = await self._run_to_exit(process, plan, sink, control, live)
        except ChildLost as lost:  # its node, or the way to it, went away while it ran
            record_usage(child, process.usage, leftovers_ended=process.leftovers_ended)
            await self._settle_workspace(child, opened)
            # Its process's end is not known: only what its CLI reported.
            exit_ = ChildExit(
                usage=_reported_usage(parser), backend_session_id=child.backend_session_id
            )
            error = ErrorInfo(lost.code, lost.message)
            self._state_machine.transition_child(run, child, ChildFailed(error, exit=exit_))
            return None
        finally:
            if live is not None:  # before its end is told: its queue and permissions end first
                control.live.pop(child.index, None)
                live.ended()
                await live.swept()
        # At its end: the tree's CPU (its cgroup's, else wait4's) and the processes the
        # stop sequence ended; every child gets resources.
        record_usage(child, process.usage, leftovers_ended=process.leftovers_ended)
        outcome = _kept_usage(parser, sink.outcome(exit_status))
        if self.sessions is not None and outcome.backend_session_id is not None:
            # The file a resume of this attempt would continue, as the attempt left it.
            seal = await asyncio.to_thread(
                self.sessions.seal, plan.backend, outcome.backend_session_id, SEALED_AT_END
            )
            child.session_digest = seal.digest if seal else None
            child.session_digest_source = seal.source if seal else None
        await self._settle_workspace(child, opened)
        self._settler.settle_child(run, child, outcome, exit_status, process.stopped_by, cause)
        return outcome.final_text if child.status is RunStatus.COMPLETED else None

    async def _run_to_exit(
        self,
        process: ChildHandle,
        plan: ChildPlan,
        sink: ChildSink,
        control: RunControl,
        live: LiveChild | None,
    ) -> tuple[StopCause | None, ProcessExit]:
        """Supervise the child until its tree is gone: what ended it, and its exit."""
        try:
            cause = await self._supervise(process, plan, sink, control, live)
            return cause, await process.wait()
        except ChildLost:
            raise  # nothing of it is left to end: its executor says so
        except Exception:  # a bug of ours: nothing of the child may outlive it
            await self._end_after_bug(process)
            raise
        finally:
            self.streams.leave(sink)
            self._sampler.unwatch(process)

    async def _supervise(
        self,
        process: ChildHandle,
        plan: ChildPlan,
        sink: ChildSink,
        control: RunControl,
        live: LiveChild | None = None,
    ) -> StopCause | None:
        """Wait for whichever comes first: exit, stop, stall, timeout, turn limit, budget.
        End the tree unless exit.

        Each is a callback settling one future (first wins): no task per watch.
        """
        loop = asyncio.get_running_loop()
        first: asyncio.Future[StopCause | None] = loop.create_future()

        def settle(cause: StopCause | None) -> None:
            if not first.done():
                first.set_result(cause)

        def on_stop(_: object) -> None:
            settle(StopCause(RunStatus.CANCELLED, control.stop_reason or "stopped"))

        # Told in the step the child is reaped, not a turn later: its end is on the
        # path of the run's answer.
        stop_listening = process.on_exit(lambda: settle(None))
        control.stopping.add_done_callback(on_stop)
        lingering: list[asyncio.TimerHandle] = []

        def on_finished() -> None:
            # The CLI printed its final event; one that does not exit soon is ended,
            # and its run is still reported by that event.
            lingering.append(loop.call_later(FINISHED_GRACE_S, settle, LINGERED))

        def on_retries_spent() -> None:
            # The CLI made its last retry: it should now fail on its own (its reason then
            # decides); one that goes on retrying is ended with its reason instead.
            def give_up() -> None:
                if (cause := _gave_up(plan, sink.retrying)) is not None:
                    settle(cause)

            lingering.append(loop.call_later(FINISHED_GRACE_S, give_up))

        sink.on_finished = on_finished
        sink.on_retries_spent = on_retries_spent
        stall = sink.watch_stall(
            plan.stall_timeout_ms / 1000, lambda: settle(_stalled(plan, sink.retrying))
        )
        timeout = loop.call_later(
            plan.timeout_ms / 1000,
            settle,
            StopCause(RunStatus.TIMED_OUT, "timeout", plan.timeout_ms),
        )
        if plan.max_turns is not None:
            sink.watch_turns(plan.max_turns, lambda: settle(MAX_TURNS))
        budget = Budget(plan.max_tokens, plan.max_cost_usd)
        if budget.is_set:
            sink.watch_budget(budget, lambda limit: settle(BUDGET_SPENT[limit]))
        if live is not None:
            live.supervise(settle)  # a close, its idle timeout, a broken protocol
        try:
            cause = await first
        finally:
            stop_listening()
            control.stopping.remove_done_callback(on_stop)
            stall.cancel()
            timeout.cancel()
            sink.unwatch_limits()
            sink.on_finished = sink.on_retries_spent = None
            for timer in lingering:
                timer.cancel()
        if cause is None or process.exited.done():
            return None  # its own exit came first: whatever else happened lost the race
        if cause is CLOSED or cause is IDLE:
            await self._close(process)
            return None  # as if it had exited: a closed conversation ends `completed`
        if cause is LINGERED:
            logger.info(
                "%r printed its final event but did not exit: ending it",
                process,
                extra=process.log_fields,
            )
            await process.stop(grace_s=LEFTOVER_GRACE_S)
            return None  # as if it had exited: its final event decides
        if live is not None and live.cancels_first and cause.status is not RunStatus.FAILED:
            # Its protocol's cancel first, so that the agent ends its turn's tools itself,
            # then its input's end and the usual end of the whole tree. Not for a child
            # that failed (a broken protocol): it would answer no cancel.
            await live.cancel_turn(min(control.grace_s, CANCEL_WAIT_S), process.exited)
            process.close_input()
        await process.stop(grace_s=control.grace_s)
        return cause

    async def _close(self, process: ChildHandle) -> None:
        """End a driven child's conversation: its stdin closes, and every CLI (every line
        program) exits at its input's end; one that does not within FINISHED_GRACE_S is
        ended."""
        process.close_input()
        try:
            await asyncio.wait_for(asyncio.shield(process.exited), FINISHED_GRACE_S)
        except TimeoutError:
            logger.info(
                "%r did not exit when its input closed: ending it",
                process,
                extra=process.log_fields,
            )
            await process.stop(grace_s=LEFTOVER_GRACE_S)

    # --- an isolated child's worktree ---------------------------------------------------

    async def _open_workspace(self, run: Run, child: ChildRun, cwd: str) -> Opened:
        """The child's worktree: its earlier attempt's (a resume), else a new one. GitFailed."""
        if child.workspace is not None and child.workspace_cwd is not None:
            if not await asyncio.to_thread(os.path.isdir, child.workspace.path):
                raise GitFailed(
                    f"the worktree {child.workspace.path!r} of this child was removed: "
                    "there is no workspace to resume in"
                )
            return reopened(child.workspace, child.workspace_cwd)
        if self.worktrees is None:
            raise GitFailed("this server has no state directory to make worktrees in")
        opened = await self.worktrees.open(run.run_id, child.index, cwd)
        # Recorded with the child's start: a server that dies while it runs leaves a
        # record that still names its worktree (listed, resumable in it).
        child.workspace, child.workspace_cwd = unmeasured(opened), opened.cwd
        return opened

    async def _settle_workspace(self, child: ChildRun, opened: Opened | None) -> None:
        """Record what the attempt left in its worktree (removed when nothing), before the
        child's terminal status is: its snapshot then carries `workspace`."""
        if opened is None or self.worktrees is None:
            return
        try:
            child.workspace = await self.worktrees.finish_attempt(opened)
        except GitFailed as exc:  # the worktree stays, and `subagent-host worktrees` lists it
            logger.warning("cannot measure the worktree %s: %s", opened.path, exc)

    async def _end_after_bug(self, process: ChildHandle) -> None:
        """End and reap the tree of a child whose supervision failed (best effort, logged)."""
        try:
            await process.stop(grace_s=LEFTOVER_GRACE_S)
            await process.wait()
        except Exception:
            logger.exception(
                "cannot end %r after an internal error", process, extra=process.log_fields
            )

    # --- output ----------------------------------------------------------------------

    def _raw_streamer(self, run: Run, child: ChildRun) -> RawSender:
        """Emit what one child printed: `output` (its stdout) and `stderr` events."""

        def stream(raw: RawEvent, text: str) -> None:
            self._state_machine.emit(run, raw(index=child.index, text=text))

        return stream

    def _activity_streamer(
        self, run: Run, child: ChildRun, parser: OutputParser
    ) -> Callable[[str], None]:
        """Emit `activity` events; the CLI's session id goes with the first one's write, so
        a server that dies mid-attempt leaves a run a later one can still resume."""

        def stream(text: str) -> None:
            if child.backend_session_id is None:
                child.backend_session_id = parser.session_id
            self._state_machine.emit(run, ActivityEvent(index=child.index, text=text))

        return stream

    def _event_streamer(self, run: Run, child: ChildRun) -> EventSender:
        """Emit an agent child's normalized events (`message`, `tool`, `usage`, `plan`)."""

        def send(event: AgentEvent) -> None:
            self._state_machine.emit(run, agent_event(child.index, event))

        return send


def _stalled(plan: ChildPlan, retrying: str | None) -> StopCause:
    """A child silent for its `stallTimeoutMs`: `timed-out`, or, when its agent CLI was
    retrying its model all that time, `failed` with `agent-error` and the CLI's reason."""
    if retrying is None:
        return StopCause(RunStatus.TIMED_OUT, "stall", plan.stall_timeout_ms)
    message = (
        f"{plan.backend} could not reach its model: {retrying} "
        f"(still retrying after {plan.stall_timeout_ms} ms without an answer)"
    )
    return StopCause(RunStatus.FAILED, AGENT_ERROR, error=(AGENT_ERROR, message))


def _gave_up(plan: ChildPlan, retrying: str | None) -> StopCause | None:
    """An agent CLI still running after its last retry: `failed` with `agent-error` and
    its reason; None (nothing to end it for) when its model answered since."""
    if retrying is None:
        return None
    message = f"{plan.backend} could not reach its model: {retrying} (its retries are spent)"
    return StopCause(RunStatus.FAILED, AGENT_ERROR, error=(AGENT_ERROR, message))


def _workspace_error(child: ChildRun, exc: GitFailed) -> str:
    """The error code of an isolated child whose worktree it cannot run in."""
    if isinstance(exc, OutsideWorktree):
        return CWD_OUTSIDE_WORKTREE
    return WORKSPACE_GONE if child.workspace is not None else WORKSPACE_FAILED


def _kept_usage(parser: OutputParser, outcome: ParsedOutcome) -> ParsedOutcome:
    """The outcome with the usage the CLI reported so far when its outcome has none: a
    child ended before its final event (a stop, its timeout, a stall, its turn limit)
    still used what it reported (protocol.md §12)."""
    if outcome.usage is not None:
        return outcome
    usage = parser.usage
    return outcome if usage is None else attrs.evolve(outcome, usage=usage)


def _reported_usage(parser: OutputParser) -> Usage | None:
    """The usage the parser reported so far, or None when the parser is what failed."""
    try:
        return parser.usage
    except Exception:
        logger.exception("cannot read the usage of a child after an internal error")
        return None


def _not_started(control: RunControl) -> ChildCancelled:
    """The ending of a child its run's stop ended before it started (the stop set its reason
    before it said so)."""
    return ChildCancelled(control.stop_reason or "stopped")


def _exit_facts(process: ChildHandle, child: ChildRun, usage: Usage | None) -> ChildExit:
    """How a child's process ended, for a child that could not be settled from its output:
    its exit as far as known, the `usage` its CLI reported, and its session as seen so far."""
    exit_ = (
        ProcessExit.from_returncode(process.returncode) if process.returncode is not None else None
    )
    return ChildExit(
        exit_code=exit_.exit_code if exit_ is not None else None,
        signal=exit_.signal if exit_ is not None else None,
        stopped_by=process.stopped_by,
        usage=usage,
        backend_session_id=child.backend_session_id,
    )
