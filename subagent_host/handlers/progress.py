"""Tell the client what runs do: `run/event` per event, `$/progress` where asked (protocol.md §11).

Every notification is about its run (`about=run_id`), so a run can be held back
as a whole: a `background` spawn or resume holds the run it starts until its
reply has been written (`announcing`), and the client learns of the run id from
that reply before any event of it. A `task`-mode request holds nothing: its
events stream before its final reply, as documented.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from subagent_host.handlers.snapshots import event_wire
from subagent_host.rpc.wire import MsgToken
from subagent_host.runs.state import TERMINAL, Run, RunEvent
from subagent_host.values.choices import StepStatus
from subagent_host.values.events import ChildEvent, StatusEvent

if TYPE_CHECKING:
    from lsprotocol.types import WorkDoneProgressBegin, WorkDoneProgressEnd, WorkDoneProgressReport


class Notify(Protocol):
    """rpc/notifier.py's `Notifier`, as far as this module uses it."""

    def __call__(self, method: str, params: object, about: str | None = None) -> None: ...

    def hold(self, about: str) -> None: ...

    def release(self, about: str) -> None: ...


class EventPublisher:
    """The run state machine's listener: one notification per event, plus LSP work-done progress."""

    def __init__(self, notify: Notify) -> None:
        self._notify = notify
        self._tokens: dict[str, MsgToken] = {}
        # While `announcing`: the runs that emitted an event meanwhile (none on entry).
        self._capturing: list[str] | None = None

    @contextlib.contextmanager
    def announcing(self, after_answer: Callable[[Callable[[], None]], None]) -> Iterator[None]:
        """Hold back every run that emits an event inside the block (the run a launch or a
        resume starts) until the running request has been answered.

        The block must not await: launching or resuming emits its run's first event
        at once, so what the block sees is that run's and no other's. The hold is
        released right after the answer is emitted, whatever the answer is
        (`after_answer`, rpc/answering.py): it lasts as long as the handler does.
        """
        assert self._capturing is None, "announcing blocks do not nest"
        captured: list[str] = []
        self._capturing = captured
        try:
            yield
        finally:
            self._capturing = None
            for run_id in captured:
                after_answer(functools.partial(self._notify.release, run_id))

    def track(self, run: Run, token: MsgToken) -> None:
        """Report this run's progress under `token` (the spawn's `workDoneToken`).

        The run is running from its launch on, before a token can be tracked: the
        `begin` is sent here, and everything after it from the run's events. The
        client may cancel it (`cancellable`): window/workDoneProgress/cancel stops the run.
        """
        # lsprotocol.types is a large module, needed only by clients that ask for progress.
        from lsprotocol.types import WorkDoneProgressBegin

        self._tokens[run.run_id] = token
        begin = WorkDoneProgressBegin(
            title=run.label or f"{run.kind} run",
            message=f"run {run.run_id} started",
            cancellable=True,
        )
        self._notify("$/progress", {"token": token, "value": begin}, about=run.run_id)

    def runs_with_token(self, token: MsgToken) -> list[str]:
        """The runs still reporting progress under `token` (the very value: 1 is not "1")."""
        return [
            run_id
            for run_id, tracked in self._tokens.items()
            if type(tracked) is type(token) and tracked == token
        ]

    def __call__(self, run: Run, event: RunEvent) -> None:
        if self._capturing is not None and run.run_id not in self._capturing:
            self._capturing.append(run.run_id)
            self._notify.hold(run.run_id)
        self._notify("run/event", event_wire(run, event), about=run.run_id)
        token = self._tokens.get(run.run_id)
        if token is not None and isinstance(event.payload, StatusEvent | ChildEvent):
            self._progress(run, event.payload, token)

    def _progress(self, run: Run, event: StatusEvent | ChildEvent, token: MsgToken) -> None:
        from lsprotocol.types import WorkDoneProgressEnd, WorkDoneProgressReport

        value: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd
        match event:
            case StatusEvent(status=status) if status in TERMINAL:
                value = WorkDoneProgressEnd(message=f"run {run.run_id} {status}")
                del self._tokens[run.run_id]
            case ChildEvent(index=index, status=status):
                value = WorkDoneProgressReport(
                    message=f"child {index} {status}", percentage=_percentage(run)
                )
            case _:
                return
        self._notify("$/progress", {"token": token, "value": value}, about=run.run_id)


def _percentage(run: Run) -> int:
    """Children ended of all children; for a workflow, whose children come step by step,
    steps completed of all steps."""
    if run.workflow is not None:
        steps = run.workflow.steps
        return round(100 * sum(step.status == StepStatus.COMPLETED for step in steps) / len(steps))
    done = sum(child.status in TERMINAL for child in run.children)
    return round(100 * done / len(run.children))
