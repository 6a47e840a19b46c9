"""Interactive children, carried by the orchestrator: a plain command that reads lines.

A turn starts when a line is written to the child and ends at the next line it prints
(backends/interactive/command_lines.py); these children are real processes, and the
harness proves none is left once each test is over.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Final

import attrs
import pytest

from subagent_host.errors import RequestRefused
from subagent_host.planning.plan import ChildPlan
from subagent_host.runs import live_requests
from subagent_host.runs.live_child import LiveChild
from subagent_host.runs.state import Run, RunStatus
from subagent_host.values.choices import Delivery, DeliveryState, Phase, TurnState
from subagent_host.values.error_data import Refusal
from subagent_host.values.events import InputEvent, OutputEvent, TurnEvent
from subagent_host.values.interaction import TurnInfo
from tests.runs.conftest import shut_down
from tests.runs.test_orchestrator import Harness, command

WAIT_S: Final = 30.0

# Answers each line with `got <line>`, except `quiet` lines (a turn that goes on);
# a SIGINT is survived (a REPL's Ctrl-C): the turn it ended is over, the program is not.
LINES: Final = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, lambda *_: None)\n"
    "for line in sys.stdin:\n"
    "    if not line.startswith('quiet'):\n"
    "        print('got ' + line.strip(), flush=True)\n"
)


def interactive(prompt: str | None = "hello", idle_timeout_ms: int = 600_000) -> ChildPlan:
    plan = command(sys.executable, "-u", "-c", LINES, prompt=prompt)
    return attrs.evolve(plan, interactive=True, idle_timeout_ms=idle_timeout_ms)


def turns(runs: Harness, run: Run) -> list[tuple[Phase, str | None]]:
    return [
        (event.payload.phase, event.payload.stop_reason)
        for event in runs.events_of(run)
        if isinstance(event.payload, TurnEvent)
    ]


def inputs(runs: Harness, run: Run) -> list[tuple[str, DeliveryState]]:
    return [
        (event.payload.text, event.payload.state)
        for event in runs.events_of(run)
        if isinstance(event.payload, InputEvent)
    ]


async def live(runs: Harness, run: Run, index: int = 0) -> LiveChild:
    """The child once it runs and its first turn ended (or it waits from the start)."""
    await runs.until(lambda: _waiting(runs, run, index))
    return live_requests.live_child(run, runs.orchestrator.control_of(run.run_id), index)


def _waiting(runs: Harness, run: Run, index: int) -> bool:
    control = runs.orchestrator.control_of(run.run_id)
    turn = run.children[index].turn
    return bool(control and index in control.live and turn and turn.state is TurnState.WAITING)


async def test_a_child_lives_on_after_its_turn_takes_the_next_message_and_closes_completed(
    runs: Harness,
) -> None:
    run = runs.launch(interactive())
    child = await live(runs, run)
    assert (run.status, run.children[0].status) == (RunStatus.RUNNING, RunStatus.RUNNING)
    assert run.children[0].turn == TurnInfo(count=1, state=TurnState.WAITING)
    message_id, state = child.send("again", Delivery.QUEUE)
    assert state is DeliveryState.DELIVERED and message_id.startswith("msg-")
    await runs.until(lambda: run.children[0].turn == TurnInfo(2, TurnState.WAITING))
    assert not await live_requests.close(run, runs.orchestrator.control_of(run.run_id), None)
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.children[0].output is not None
    assert run.children[0].output.text == "got hello\ngot again\n"
    assert turns(runs, run) == [(Phase.START, None), (Phase.END, "end_turn")] * 2
    assert inputs(runs, run) == [("again", DeliveryState.DELIVERED)]


async def test_queue_waits_for_the_turn_and_steer_goes_into_it(runs: Harness) -> None:
    run = runs.launch(interactive(prompt="quiet"))
    await runs.until(lambda: bool(turns(runs, run)))
    control = runs.orchestrator.control_of(run.run_id)
    child = live_requests.live_child(run, control, 0)
    assert child.send("later", Delivery.QUEUE)[1] is DeliveryState.QUEUED
    assert child.send("now", Delivery.STEER)[1] is DeliveryState.DELIVERED
    await runs.until(lambda: run.children[0].turn == TurnInfo(2, TurnState.WAITING))
    assert inputs(runs, run) == [
        ("later", DeliveryState.QUEUED),
        ("now", DeliveryState.DELIVERED),
        ("later", DeliveryState.DELIVERED),
    ]
    outputs = "".join(
        e.payload.text for e in runs.events_of(run) if isinstance(e.payload, OutputEvent)
    )
    assert outputs == ""  # the run does not stream: its output is its final text
    await live_requests.close(run, control, 0)
    assert run.children[0].output is not None
    assert run.children[0].output.text == "got now\ngot later\n"


async def test_an_interrupt_ends_the_turn_not_the_child(runs: Harness) -> None:
    run = runs.launch(interactive())
    child = await live(runs, run)  # its answer says it runs, its SIGINT handler set
    assert child.interrupt() is False  # waiting: nothing to interrupt
    child.send("quiet", Delivery.QUEUE)
    assert child.interrupt() is True
    assert turns(runs, run)[2:] == [(Phase.START, None), (Phase.END, "interrupted")]
    child.send("still there?", Delivery.QUEUE)
    await runs.until(lambda: run.children[0].turn == TurnInfo(3, TurnState.WAITING))
    await live_requests.close(run, runs.orchestrator.control_of(run.run_id), 0)
    assert run.status is RunStatus.COMPLETED
    assert run.children[0].output is not None
    assert run.children[0].output.text == "got hello\ngot still there?\n"


async def test_a_child_left_waiting_is_closed_after_its_idle_timeout(runs: Harness) -> None:
    run = runs.launch(interactive(idle_timeout_ms=300))
    await runs.finish(run)
    assert run.status is RunStatus.COMPLETED
    assert run.children[0].turn == TurnInfo(count=1, state=TurnState.WAITING)


async def test_a_stop_drops_what_is_queued(runs: Harness) -> None:
    run = runs.launch(interactive(prompt="quiet"))
    await runs.until(lambda: bool(turns(runs, run)))
    child = live_requests.live_child(run, runs.orchestrator.control_of(run.run_id), 0)
    child.send("never", Delivery.QUEUE)
    await runs.orchestrator.stop(run, grace_ms=2000, reason="test")
    assert run.status is RunStatus.CANCELLED
    assert inputs(runs, run) == [("never", DeliveryState.QUEUED), ("never", DeliveryState.DROPPED)]


async def test_requests_a_child_cannot_take_are_refused_with_their_reason(runs: Harness) -> None:
    plain = runs.launch(command("sleep", "30"))
    await runs.until(lambda: plain.children[0].status is RunStatus.RUNNING)
    control = runs.orchestrator.control_of(plain.run_id)
    with pytest.raises(RequestRefused) as refused:
        live_requests.live_child(plain, control, 0)
    assert refused.value.data == Refusal("not-interactive", plain.run_id, index=0)
    run = runs.launch(interactive(idle_timeout_ms=100))
    await runs.finish(run)
    with pytest.raises(RequestRefused) as refused:
        live_requests.live_child(run, runs.orchestrator.control_of(run.run_id), 0)
    assert refused.value.data == Refusal("not-running", run.run_id, index=0)
    assert await live_requests.close(run, runs.orchestrator.control_of(run.run_id), 0)
    await runs.orchestrator.stop(plain, grace_ms=0, reason="test")


async def test_what_a_streamed_child_printed_comes_before_the_turn_end_it_caused(
    runs: Harness,
) -> None:
    run = runs.launch(interactive(), stream=True)
    await live(runs, run)
    told = [
        e.payload.type
        for e in runs.events_of(run)
        if isinstance(e.payload, OutputEvent | TurnEvent)
    ]
    # start, "got hello" (in as many chunks as it was read in), end
    assert told[0] == told[-1] == "turn" and set(told[1:-1]) == {"output"}, told
    await live_requests.close(run, runs.orchestrator.control_of(run.run_id), 0)


async def test_a_child_with_no_first_prompt_waits_from_its_start(runs: Harness) -> None:
    run = runs.launch(interactive(prompt=None))
    child = await live(runs, run)
    assert run.children[0].turn == TurnInfo(count=0, state=TurnState.WAITING)
    child.send("first", Delivery.STEER)
    await runs.until(lambda: run.children[0].turn == TurnInfo(1, TurnState.WAITING))
    await asyncio.wait_for(
        live_requests.close(run, runs.orchestrator.control_of(run.run_id), None), WAIT_S
    )
    assert run.children[0].output is not None
    assert run.children[0].output.text == "got first\n"


async def test_a_message_sent_before_the_child_started_waits_for_it() -> None:
    runs = Harness(limit=1)  # one slot: the interactive child waits behind a sleeper
    try:
        sleeper = runs.launch(command("sleep", "30"))
        run = runs.launch(interactive())
        await runs.until(lambda: sleeper.children[0].status is RunStatus.RUNNING)
        control = runs.orchestrator.control_of(run.run_id)
        emit = runs.state_machine.emit
        message_id, state = live_requests.send(run, control, 0, "early", Delivery.QUEUE, emit)
        assert state is DeliveryState.QUEUED and run.children[0].status is RunStatus.QUEUED
        await runs.orchestrator.stop(sleeper, grace_ms=0, reason="make room")
        await runs.until(lambda: run.children[0].turn == TurnInfo(2, TurnState.WAITING))
        assert inputs(runs, run) == [
            ("early", DeliveryState.QUEUED),
            ("early", DeliveryState.DELIVERED),
        ]
        await live_requests.close(run, control, 0)
        assert run.children[0].output is not None
        assert run.children[0].output.text == "got hello\ngot early\n"
    finally:
        await shut_down(runs)


async def test_a_message_for_a_child_that_never_started_is_dropped() -> None:
    runs = Harness(limit=1)
    try:
        sleeper = runs.launch(command("sleep", "30"))
        run = runs.launch(interactive())
        await runs.until(lambda: sleeper.children[0].status is RunStatus.RUNNING)
        control = runs.orchestrator.control_of(run.run_id)
        live_requests.send(run, control, 0, "never", Delivery.QUEUE, runs.state_machine.emit)
        await runs.orchestrator.stop(run, grace_ms=0, reason="not wanted")
        assert run.children[0].status is RunStatus.CANCELLED
        assert inputs(runs, run) == [
            ("never", DeliveryState.QUEUED),
            ("never", DeliveryState.DROPPED),
        ]
    finally:
        await shut_down(runs)


async def test_closing_a_run_with_no_interactive_child_is_refused(runs: Harness) -> None:
    plain = runs.launch(command("sleep", "30"))
    await runs.until(lambda: plain.children[0].status is RunStatus.RUNNING)
    with pytest.raises(RequestRefused) as refused:
        await live_requests.close(plain, runs.orchestrator.control_of(plain.run_id), None)
    assert refused.value.data == Refusal("not-interactive", plain.run_id)
    await runs.orchestrator.stop(plain, grace_ms=0, reason="test")
