"""The INFO lines that tell a run's story: its start, each child's start and end, its end.

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

import logging
import signal
from datetime import datetime
from typing import TYPE_CHECKING

from subagent_host.values import RunKind
from subagent_host.values.words import plural

if TYPE_CHECKING:  # state.py calls these: no import of it at run time
    from subagent_host.runs.state import ChildRun, Run

logger = logging.getLogger(__name__)


def run_started(run: Run) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    if run.kind is RunKind.WORKFLOW and run.workflow is not None:
        size = plural(len(run.workflow.steps), "step")
    else:
        size = plural(len(run.children), "child", "children")
    logger.info(
        "run %s started: %s, %s, session %s",
        run.run_id,
        run.kind,
        size,
        run.session_id,
        extra={"runId": run.run_id},
    )


def run_resumed(run: Run, child: ChildRun) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    logger.info(
        "run %s resumed: child %d, attempt %d",
        run.run_id,
        child.index,
        child.attempt,
        extra={"runId": run.run_id, "index": child.index},
    )


def stop_requested(run: Run, reason: str, grace_s: float) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    logger.info(
        "run %s stopping (%s): SIGTERM to each running child's tree, SIGKILL after %.3f s",
        run.run_id,
        reason,
        grace_s,
        extra={"runId": run.run_id},
    )


def child_started(run: Run, child: ChildRun) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    logger.info(
        "run %s child %d started: pid %s, backend %s, attempt %d",
        run.run_id,
        child.index,
        child.pid,
        child.backend,
        child.attempt,
        extra={"runId": run.run_id, "index": child.index, "pid": child.pid},
    )


def child_ended(run: Run, child: ChildRun) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    if child.exit_code is not None:
        how = f"exit code {child.exit_code}"
    elif child.signal is not None:
        how = f"signal {signal.Signals(child.signal).name}"
    else:
        how = "no exit code"
    why = child.error.code if child.error is not None else child.reason
    logger.info(
        "run %s child %d ended: %s%s, %s, %s",
        run.run_id,
        child.index,
        child.status,
        f" ({why})" if why else "",
        how,
        _took(child.started_at, child.ended_at, "after {} s"),
        extra={"runId": run.run_id, "index": child.index, "pid": child.pid},
    )


def run_ended(run: Run) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    why = run.error.code if run.error is not None else run.reason or run.reached_limit
    logger.info(
        "run %s ended: %s%s, %s",
        run.run_id,
        run.status,
        f" ({why})" if why else "",
        _took(run.created_at, run.ended_at, "{} s after it was created"),
        extra={"runId": run.run_id},
    )


def _took(start: datetime | None, end: datetime | None, wording: str) -> str:
    """The seconds from `start` to `end` in `wording` (`after {} s`), milliseconds shown."""
    if start is None or end is None:
        return "never started"
    return wording.format(f"{(end - start).total_seconds():.3f}")
