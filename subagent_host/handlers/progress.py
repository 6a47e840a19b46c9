"""Tell the client what runs do: `run/event` per event, `$/progress` where asked (CONTRACT §4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from subagent_host.handlers.snapshots import event_wire
from subagent_host.rpc.wire import MsgToken
from subagent_host.runs.state import TERMINAL, Run, RunEvent, RunStatus

if TYPE_CHECKING:
    from lsprotocol.types import WorkDoneProgressBegin, WorkDoneProgressEnd, WorkDoneProgressReport

Notify = Callable[[str, Any], None]


class EventPublisher:
    """The run book's listener: one notification per event, plus LSP work-done progress."""

    def __init__(self, notify: Notify) -> None:
        self._notify = notify
        self._tokens: dict[str, MsgToken] = {}

    def track(self, run: Run, token: MsgToken) -> None:
        """Report this run's progress under `token` (the spawn's `workDoneToken`).

        The run is running from its launch on, before a token can be tracked: the
        `begin` is sent here, and everything after it from the run's events.
        """
        # lsprotocol.types is a large module, needed only by clients that ask for progress.
        from lsprotocol.types import WorkDoneProgressBegin

        self._tokens[run.run_id] = token
        begin = WorkDoneProgressBegin(
            title=run.label or f"{run.kind} run", message=f"run {run.run_id} started"
        )
        self._notify("$/progress", {"token": token, "value": begin})

    def __call__(self, run: Run, event: RunEvent) -> None:
        self._notify("run/event", event_wire(run, event))
        token = self._tokens.get(run.run_id)
        if token is not None and event.type in ("status", "child"):
            self._progress(run, event, token)

    def _progress(self, run: Run, event: RunEvent, token: MsgToken) -> None:
        from lsprotocol.types import WorkDoneProgressEnd, WorkDoneProgressReport

        status = RunStatus(event.fields["status"])
        value: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd
        if event.type == "status" and status in TERMINAL:
            value = WorkDoneProgressEnd(message=f"run {run.run_id} {status}")
            del self._tokens[run.run_id]
        elif event.type == "child":
            value = WorkDoneProgressReport(
                message=f"child {event.fields['index']} {status}", percentage=_percentage(run)
            )
        else:
            return
        self._notify("$/progress", {"token": token, "value": value})


def _percentage(run: Run) -> int:
    """Children ended of all children; for a workflow, whose children come step by step,
    steps completed of all steps."""
    if run.workflow is not None:
        steps = run.workflow.steps
        return round(100 * sum(step.status == RunStatus.COMPLETED for step in steps) / len(steps))
    done = sum(child.status in TERMINAL for child in run.children)
    return round(100 * done / len(run.children))
