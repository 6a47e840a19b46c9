"""What a client asks of a run's interactive children (protocol.md §23): which child a
request reaches, why one cannot be reached, and a close that waits for its end.

The methods' handlers find the run (its session checked by the store) and the child's
index; these functions reach the child's `LiveChild` through the run's control, or
refuse with `RequestRefused` (-32003) naming why: `not-interactive` (the child takes no
messages), `not-running` (it has not started, or has ended), `not-pending` (no such
permission waits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from subagent_host.errors import RequestRefused
from subagent_host.runs.live_child import EarlyMessage, LiveChild, NotPending, new_message_id
from subagent_host.runs.run_control import RunControl
from subagent_host.runs.state import TERMINAL, Run, RunStatus
from subagent_host.values.choices import Delivery, DeliveryState, OptionKind
from subagent_host.values.error_data import Refusal
from subagent_host.values.events import Event, InputEvent

NOT_INTERACTIVE: Final = "not-interactive"
NOT_RUNNING: Final = "not-running"
NOT_PENDING: Final = "not-pending"

CLOSE_WAIT_S: Final = 30.0
"""The most a close waits for its children to end: their CLIs get FINISHED_GRACE_S to
exit at their input's end, then the stop sequence (runs/child_runner.py)."""


def interactive_indexes(run: Run) -> list[int]:
    """The run's interactive children (each has a `turn` from the start)."""
    return [child.index for child in run.children if child.turn is not None]


def live_child(run: Run, control: RunControl | None, index: int) -> LiveChild:
    """The running interactive child `index` of `run`, else RequestRefused."""
    if run.children[index].turn is None:
        raise _not_interactive(run, index)
    live = control.live.get(index) if control is not None and not run.is_terminal else None
    if live is None or live.over or live.closing:
        status = run.children[index].status.value
        raise _refused(
            run, NOT_RUNNING, f"child {index} of run {run.run_id} is not running ({status})", index
        )
    return live


def send(
    run: Run,
    control: RunControl | None,
    index: int,
    text: str,
    delivery: Delivery,
    emit: Callable[[Run, Event], object],
) -> tuple[str, DeliveryState]:
    """A live message to the interactive child `index`: to it now, or, when it has not
    started yet, `queued` until it has (`early`); else RequestRefused."""
    child = run.children[index]
    if (
        child.turn is not None
        and child.status is RunStatus.QUEUED
        and control is not None
        and not run.is_terminal
        and index not in control.live
    ):
        message = EarlyMessage(new_message_id(), text, delivery)
        control.early.setdefault(index, []).append(message)
        emit(run, InputEvent(index=index, message_id=message.message_id,
                             state=DeliveryState.QUEUED, text=text))  # fmt: skip
        return message.message_id, DeliveryState.QUEUED
    return live_child(run, control, index).send(text, delivery)


def drop_early(
    run: Run, control: RunControl, index: int, emit: Callable[[Run, Event], object]
) -> None:
    """The messages sent before child `index` started, when it never did: `dropped`."""
    for message in control.early.pop(index, []):
        emit(run, InputEvent(index=index, message_id=message.message_id,
                             state=DeliveryState.DROPPED, text=message.text))  # fmt: skip


def permit(
    run: Run, control: RunControl | None, permission_id: str, option_id: str, who: str
) -> OptionKind:
    """Answer a pending permission of the run. RequestRefused (`not-pending`): none of that
    id waits; ValueError: an option it does not offer."""
    pending = run.pending_permissions.get(permission_id)
    live = control.live.get(pending.index) if control is not None and pending else None
    if pending is None or live is None:
        raise _not_pending(run, permission_id)
    try:
        return live.permit(permission_id, option_id, who)
    except NotPending:
        raise _not_pending(run, permission_id) from None


async def close(run: Run, control: RunControl | None, index: int | None) -> bool:
    """Close the run's interactive child `index`, or every one (None), and wait for their
    end (and the run's, when nothing else of it runs). True: the run had ended already.
    A child that already ended is a no-op; one that has not started is `not-running`."""
    if run.is_terminal or control is None:
        return True
    indexes = [index] if index is not None else interactive_indexes(run)
    if not indexes:
        raise RequestRefused(
            f"run {run.run_id} has no interactive child: there is nothing to close",
            data=Refusal(NOT_INTERACTIVE, run.run_id),
        )
    closing: list[LiveChild] = []
    for i in indexes:
        child = run.children[i]
        if child.turn is None:
            raise _not_interactive(run, i)
        live = control.live.get(i)
        if live is not None:
            closing.append(live)
        elif child.status not in TERMINAL and index is not None:
            raise _refused(run, NOT_RUNNING, f"child {i} of run {run.run_id} has not started", i)
    for live in closing:
        live.close()
    waits = [live.gone.wait() for live in closing]
    if index is None and all(c.status in TERMINAL or c.index in indexes for c in run.children):
        waits.append(control.done.wait())  # nothing else of it runs: answer with its end
    if waits:
        await asyncio.wait_for(asyncio.gather(*waits), CLOSE_WAIT_S)
    return False


def _not_pending(run: Run, permission_id: str) -> RequestRefused:
    message = f"no permission {permission_id!r} of run {run.run_id} waits for an answer"
    return RequestRefused(
        message, data=Refusal(NOT_PENDING, run.run_id, permission_id=permission_id)
    )


def _not_interactive(run: Run, index: int) -> RequestRefused:
    message = f"child {index} of run {run.run_id} is not interactive"
    return _refused(run, NOT_INTERACTIVE, message, index)


def _refused(run: Run, reason: str, message: str, index: int) -> RequestRefused:
    return RequestRefused(message, data=Refusal(reason, run.run_id, index=index))
