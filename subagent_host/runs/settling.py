"""Settle statuses: a child's from how it ended, a run's from its children's.

A child's terminal status follows from its own exit and outcome, or from what
ended it first (a stop, its timeout, a stall, its turn limit). A run's follows from its
children's: completed when all completed, else the first one that did not.

Everything a run's ending takes from that child is kept with the child (its
enforced timeout, the limit it names as its reason), never beside it: a run
settles again after each resume of any of its children, on whichever server
(protocol.md §15), and the child it settles from may have ended long before.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from subagent_host.backends.base import ParsedOutcome
from subagent_host.backends.exits import ProcessExit, StoppedBy
from subagent_host.runs.endings import (
    Cancelled,
    ChildCancelled,
    ChildCompleted,
    ChildEnding,
    ChildExit,
    ChildFailed,
    ChildLimitReached,
    ChildTimedOut,
    Completed,
    Failed,
    LimitReached,
    TimedOut,
)
from subagent_host.runs.outputs import OutputCaps, child_output, parallel_summary, text_output
from subagent_host.runs.state import ChildRun, Run, RunStateMachine, RunStatus
from subagent_host.values import RunKind
from subagent_host.values.choices import ReachedLimit, member
from subagent_host.values.facts import ErrorInfo, OutputInfo


@attrs.frozen
class StopCause:
    """Why the server ended a running child (a stop, its timeout, a stall, its turn
    limit, lingering after its final event): what its status follows instead of its exit."""

    status: RunStatus
    reason: str
    enforced_timeout_ms: int | None = None
    reached_limit: ReachedLimit | None = None
    """The limit a `limit-reached` ending enforced (e.g. `max-turns`)."""
    error: tuple[str, str] | None = None
    """A `failed` ending's error code and sentence (an agent CLI that stalled retrying
    its model: `agent-error`); its data is the exit's, as the parser reports it."""


class Settler:
    """Moves children and runs to their one terminal status through the run state machine."""

    def __init__(self, state_machine: RunStateMachine, caps: OutputCaps) -> None:
        self._state_machine = state_machine
        self._caps = caps

    def settle_child(
        self,
        run: Run,
        child: ChildRun,
        outcome: ParsedOutcome,
        exit_status: ProcessExit,
        stopped_by: StoppedBy,
        ending: StopCause | None,
    ) -> None:
        completed = ending is None and outcome.completed
        output = child_output(
            self._caps, outcome, parallel=run.kind is RunKind.PARALLEL, partial=not completed
        )
        exit_ = ChildExit(
            exit_code=exit_status.exit_code,
            signal=exit_status.signal,
            stopped_by=stopped_by,
            usage=outcome.usage,
            backend_session_id=outcome.backend_session_id,
        )
        if completed:
            self._state_machine.transition_child(run, child, ChildCompleted(output, exit_))
        elif ending is not None and ending.error is not None:
            error = ErrorInfo(*ending.error, outcome.error_data)
            self._state_machine.transition_child(run, child, ChildFailed(error, output, exit_))
        elif ending is not None:
            self._state_machine.transition_child(run, child, _stopped(ending, output, exit_))
        elif outcome.reached_limit is not None:  # the CLI stopped at a limit of its own
            self._state_machine.transition_child(
                run, child, ChildLimitReached(outcome.reached_limit, output, exit_)
            )
        else:
            error = ErrorInfo(
                outcome.error_code or "failed",
                outcome.error_message or "failed",
                outcome.error_data,
            )
            self._state_machine.transition_child(run, child, ChildFailed(error, output, exit_))

    def settle_run(self, run: Run, stop_reason: str | None) -> None:
        """The run's one terminal status, from its children's."""
        unfinished = [c for c in run.children if c.status is not RunStatus.COMPLETED]
        output: OutputInfo | None
        if run.kind is RunKind.PARALLEL:
            output = parallel_summary(run, partial=bool(unfinished))
        else:
            last = unfinished[0] if unfinished else run.children[-1]
            output = last.output
        self._settle_from(run, stop_reason, unfinished, output)

    def settle_workflow(
        self,
        run: Run,
        stop_reason: str | None,
        children: Sequence[ChildRun],
        last_text: str | None,
    ) -> None:
        """A workflow's end: its last step's text, or the first step that did not complete."""
        unfinished = [c for c in children if c.status is not RunStatus.COMPLETED]
        if not unfinished and last_text is not None:
            self._state_machine.transition(
                run, Completed(text_output(self._caps, last_text, partial=False))
            )
            return
        if not unfinished:  # a step that never started: the run was stopped before it
            self._state_machine.transition(run, Cancelled(stop_reason or "stopped"))
            return
        self._settle_from(run, stop_reason, unfinished, unfinished[0].output)

    def _settle_from(
        self,
        run: Run,
        stop_reason: str | None,
        unfinished: Sequence[ChildRun],
        output: OutputInfo | None,
    ) -> None:
        """Settle from the children that did not complete (none: the run completed)."""
        if not unfinished:
            self._state_machine.transition(run, Completed(output))
            return
        first = unfinished[0]
        if first.status is RunStatus.FAILED and first.error is not None:
            error = first.error
            if run.kind is not RunKind.SINGLE:
                data = {"index": first.index, **(error.data or {})}
                error = ErrorInfo(error.code, f"child {first.index}: {error.message}", data)
            self._state_machine.transition(run, Failed(error, output))
        elif first.status is RunStatus.LIMIT_REACHED:
            # A limit-reached child names its limit as its reason (endings.py).
            limit = member(ReachedLimit, first.reason)
            if limit is None:
                raise ValueError(f"limit-reached child {first.index} without its limit")
            self._state_machine.transition(run, LimitReached(limit, output))
        elif first.status is RunStatus.TIMED_OUT:
            timeout, reason = first.enforced_timeout_ms, first.reason
            if timeout is None or reason is None:
                # Only a ChildTimedOut makes a child timed-out, and it carries both; a
                # record from before the timeout was kept with the child has it filled
                # from its run's when read back (store/reads.py).
                raise ValueError(f"timed-out child {first.index} without its timeout")
            self._state_machine.transition(run, TimedOut(reason, timeout, output))
        else:
            reason = stop_reason or first.reason or "stopped"
            self._state_machine.transition(run, Cancelled(reason, output))


def _stopped(cause: StopCause, output: OutputInfo | None, exit_: ChildExit) -> ChildEnding:
    """The ending of a child the server ended for `cause` (a failing cause is not one)."""
    if cause.status is RunStatus.TIMED_OUT:
        if cause.enforced_timeout_ms is None:
            raise ValueError("a timeout ends a child only with the timeout it enforced")
        return ChildTimedOut(cause.reason, cause.enforced_timeout_ms, output, exit_)
    if cause.status is RunStatus.LIMIT_REACHED:
        return ChildLimitReached(cause.reason, output, exit_)
    if cause.status is RunStatus.CANCELLED:
        return ChildCancelled(cause.reason, output, exit_)
    raise ValueError(f"a stop does not end a child {cause.status}")
