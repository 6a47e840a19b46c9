"""The INFO lines of a run's lifecycle: its start, each child's start and end, its end.

`RunStateMachine` calls these where a status changes, the one place every path goes
through, so each line is written once whatever starts or ends the run (a spawn, a
resume, an exit, a stop, a timeout, a dead server's recovery); the orchestrator
tells a resume and a stop request. The stop sequence's own steps (SIGTERM, the
grace, SIGKILL, leftovers ended) are the supervisor's lines (backends/supervisor.py).
Each line carries `runId` (and a child's `index` and `pid`) for `--log-format json`;
nothing is built unless INFO is on: logging is WARNING by default, and a spawn must
not pay for it.
"""

from __future__ import annotations

import functools
import logging
import signal
from collections.abc import Callable, Sized
from datetime import datetime
from typing import ParamSpec, Protocol

from subagent_host.values import RunKind, RunStatus
from subagent_host.values.facts import ErrorInfo
from subagent_host.values.plurals import plural

# state.py calls these with its `Run` and `ChildRun`: this module names only the facts its
# lines tell (read-only, so mypy checks them against those classes at each call), and
# imports nothing of the state machine, not even for its annotations.


class _Ended(Protocol):
    @property
    def status(self) -> RunStatus: ...
    @property
    def ended_at(self) -> datetime | None: ...
    @property
    def error(self) -> ErrorInfo | None: ...
    @property
    def reason(self) -> str | None: ...


class ChildRun(_Ended, Protocol):
    """What the lines tell of a child."""

    @property
    def index(self) -> int: ...
    @property
    def backend(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def signal(self) -> int | None: ...
    @property
    def started_at(self) -> datetime | None: ...


class _Workflow(Protocol):
    @property
    def steps(self) -> Sized: ...


class Run(_Ended, Protocol):
    """What the lines tell of a run."""

    @property
    def run_id(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def kind(self) -> RunKind: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def children(self) -> Sized: ...
    @property
    def workflow(self) -> _Workflow | None: ...
    @property
    def reached_limit(self) -> str | None: ...


logger = logging.getLogger(__name__)

P = ParamSpec("P")


def _at_info(tell: Callable[P, None]) -> Callable[P, None]:
    """`tell`, called only while INFO is on: with logging at WARNING (the default) a line
    costs one level check, nothing of it is built."""

    @functools.wraps(tell)
    def told(*args: P.args, **kwargs: P.kwargs) -> None:
        if logger.isEnabledFor(logging.INFO):
            tell(*args, **kwargs)

    return told


def _tell(run: Run, message: str, *args: object, **ids: int | None) -> None:
    """One lifecycle line: `run ID ` and `message`; `runId` and `ids` (a child's `index`,
    `pid`) go with it for `--log-format json`."""
    logger.info("run %s " + message, run.run_id, *args, extra={"runId": run.run_id, **ids})


@_at_info
def run_started(run: Run) -> None:
    if run.kind is RunKind.WORKFLOW and run.workflow is not None:
        size = plural(len(run.workflow.steps), "step")
    else:
        size = plural(len(run.children), "child", "children")
    _tell(run, "started: %s, %s, session %s", run.kind, size, run.session_id)


@_at_info
def run_resumed(run: Run, child: ChildRun) -> None:
    _tell(run, "resumed: child %d, attempt %d", child.index, child.attempt, index=child.index)


@_at_info
def stop_requested(run: Run, reason: str, grace_s: float) -> None:
    _tell(
        run,
        "stopping (%s): SIGTERM to each running child's tree, SIGKILL after %.3f s",
        reason,
        grace_s,
    )


@_at_info
def child_started(run: Run, child: ChildRun) -> None:
    _tell(
        run,
        "child %d started: pid %s, backend %s, attempt %d",
        child.index,
        child.pid,
        child.backend,
        child.attempt,
        index=child.index,
        pid=child.pid,
    )


@_at_info
def child_ended(run: Run, child: ChildRun) -> None:
    if child.exit_code is not None:
        how = f"exit code {child.exit_code}"
    elif child.signal is not None:
        how = f"signal {signal.Signals(child.signal).name}"
    else:
        how = "no exit code"
    why = child.error.code if child.error is not None else child.reason
    _tell(
        run,
        "child %d ended: %s%s, %s, %s",
        child.index,
        child.status,
        f" ({why})" if why else "",
        how,
        _took(child.started_at, child.ended_at, "after {} s"),
        index=child.index,
        pid=child.pid,
    )


@_at_info
def run_ended(run: Run) -> None:
    why = run.error.code if run.error is not None else run.reason or run.reached_limit
    _tell(
        run,
        "ended: %s%s, %s",
        run.status,
        f" ({why})" if why else "",
        _took(run.created_at, run.ended_at, "{} s after it was created"),
    )


def _took(start: datetime | None, end: datetime | None, wording: str) -> str:
    """The seconds from `start` to `end` in `wording` (`after {} s`), milliseconds shown."""
    if start is None or end is None:
        return "never started"
    return wording.format(f"{(end - start).total_seconds():.3f}")
