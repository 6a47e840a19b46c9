"""The one path of every child (slot -> start -> supervise -> settle), used alone."""

from __future__ import annotations

import asyncio
import os

from subagent_host.backends.command import CommandBackend
from subagent_host.backends.exits import StoppedBy
from subagent_host.backends.supervisor import Supervisor
from subagent_host.runs.child_runner import ChildRunner
from subagent_host.runs.run_control import RunControl
from subagent_host.runs.scheduler import Slots
from subagent_host.runs.services import ChildServices
from subagent_host.runs.settling import Settler
from subagent_host.runs.state import ChildRun, Run, RunEvent, RunStateMachine, RunStatus
from subagent_host.values import RunKind
from subagent_host.values.events import ChildEvent
from tests.backends.conftest import processes_with_marker
from tests.runs.test_orchestrator import CAPS, command
from tests.waits import loop_turns

WAIT_S = 30.0


def new_run(run_id: str) -> Run:
    return Run(
        run_id=run_id,
        session_id="s1",
        kind=RunKind.SINGLE,
        fingerprint="sha256:v1:" + "0" * 64,
        created_at=RunStateMachine().now(),
        children=[ChildRun(index=0, backend="command")],
    )


def new_runner(slots: Slots, events: list[RunEvent]) -> ChildRunner:
    state_machine = RunStateMachine(listener=lambda _run, event: events.append(event))
    services = ChildServices(
        supervisor=Supervisor(),
        backends={"command": CommandBackend()},
        slots=slots,
        state_machine=state_machine,
        caps=CAPS,
        server_env=os.environ,
        depth=0,
    )
    return ChildRunner(services, Settler(state_machine, CAPS))


async def test_a_child_goes_from_queued_to_one_terminal_status_and_gives_its_slot_back() -> None:
    events: list[RunEvent] = []
    slots = Slots(1)
    runner = new_runner(slots, events)
    run = new_run("child-runner-1")
    control = RunControl(grace_s=1.0)
    plan = command("sh", "-c", "echo hi")
    text = await asyncio.wait_for(runner.run(run, 0, plan, control), WAIT_S)
    child = run.children[0]
    assert (text, child.status, child.stopped_by) == ("hi\n", RunStatus.COMPLETED, StoppedBy.EXIT)
    assert [e.payload.status for e in events if isinstance(e.payload, ChildEvent)] == [
        "running",
        "completed",
    ]
    assert slots.try_acquire()  # the slot it held is free again
    assert processes_with_marker(run.run_id) == []


async def test_a_child_stopped_while_it_waits_for_a_slot_never_starts() -> None:
    events: list[RunEvent] = []
    slots = Slots(1)
    assert slots.try_acquire()  # every slot is taken
    runner = new_runner(slots, events)
    run = new_run("child-runner-2")
    control = RunControl(grace_s=1.0, stop_reason="not now")
    waiting = asyncio.ensure_future(runner.run(run, 0, command("true"), control))
    await loop_turns()  # it is waiting for the slot now
    assert not waiting.done()
    control.stopping.set_result(None)
    assert await asyncio.wait_for(waiting, WAIT_S) is None
    child = run.children[0]
    assert (child.status, child.reason, child.pid) == (RunStatus.CANCELLED, "not now", None)
    slots.release()
    assert slots.try_acquire()  # the runner holds no slot
