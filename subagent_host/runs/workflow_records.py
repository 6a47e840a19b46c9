"""What a workflow leaves behind as it goes: its definition, its children's
projections and texts, and its `snapshotPath` file.

The server records them in the store (app.py wires `WorkflowRecords` to the
recorder); `write_snapshot` rewrites the snapshot file and turns a skipped
write into one warning on the run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

import attrs

from subagent_host.planning.plan import RunPlan
from subagent_host.planning.views import Projection
from subagent_host.runs.state import Run
from subagent_host.values.facts import Diagnostic

logger = logging.getLogger(__name__)


async def _no_snapshot(_run: Run, _path: str) -> str | None:
    return None


# A skipped `snapshotPath` write, as a warning on the run (see `write_snapshot`).
SNAPSHOT_SKIPPED: Final = "snapshot-skipped"


@attrs.frozen
class WorkflowRecords:
    """Where a workflow's definition, its children's texts and its snapshot file go."""

    definition: Callable[[Run, RunPlan], None] = lambda _run, _plan: None
    child_added: Callable[[Run, int, Projection], None] = lambda _run, _i, _p: None
    text: Callable[[Run, int, str], None] = lambda _run, _i, _t: None
    snapshot: Callable[[Run, str], Awaitable[str | None]] = _no_snapshot
    """Rewrite the workflow's `snapshotPath` with the run as it is now; the result is
    why the write was skipped (the path is no longer a regular file), or None."""
    touched: Callable[[Run], None] = lambda _run: None
    """Record a change of the run that came without an event (a new diagnostic)."""


async def write_snapshot(records: WorkflowRecords, run: Run, path: str | None) -> None:
    """Rewrite the run's snapshot file, if it has one; a failed or skipped write is no error."""
    if path is None:
        return
    try:
        skipped = await records.snapshot(run, path)
    except OSError as exc:  # the run goes on; the file is only a convenience
        logger.warning(
            "cannot write the snapshot of run %s to %s: %s",
            run.run_id,
            path,
            exc,
            extra={"runId": run.run_id},
        )
        return
    if skipped is None:
        return
    # The path changed under the run (e.g. into a FIFO): it is left alone, the
    # run goes on, and its client learns why the file stopped changing — once.
    logger.info(
        "snapshot of run %s not written: %s", run.run_id, skipped, extra={"runId": run.run_id}
    )
    warning = Diagnostic(
        severity="warning",
        code=SNAPSHOT_SKIPPED,
        message=f"the snapshot was not written: {skipped}",
        path="workflow.snapshotPath",
    )
    if warning not in run.diagnostics:
        run.diagnostics = (*run.diagnostics, warning)
        records.touched(run)
