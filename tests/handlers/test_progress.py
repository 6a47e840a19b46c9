"""A run's notifications wait for the reply that names it: the mechanism, in memory.

The dispatcher, the notifier and the event publisher as the server joins them,
with a handler that launches a run the way `spawn` does (its first event is
emitted inside the launch) and keeps going for a turn before it answers.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from subagent_host.handlers.progress import EventPublisher
from subagent_host.rpc.answering import after_answer
from subagent_host.rpc.dispatch import Method, make_protocol
from subagent_host.rpc.framing import Parsed
from subagent_host.rpc.notifier import Notifier
from subagent_host.runs.state import ChildRun, Run, RunStateMachine
from subagent_host.values import RunKind
from subagent_host.values.events import OutputEvent

T0 = datetime(2026, 11, 30, tzinfo=UTC)


@attrs.frozen
class LaunchParams:
    mode: str
    fail: bool = False


def make_run(run_id: str) -> Run:
    return Run(
        run_id=run_id,
        session_id="s1",
        kind=RunKind.SINGLE,
        fingerprint="sha256:v1:" + "0" * 64,
        created_at=T0,
        children=[ChildRun(index=0, backend="command")],
    )


class Server:
    """Dispatch, notifier and publisher joined as app.py joins them; output in `sent`."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.protocol = make_protocol()
        self.notifier = Notifier(self.protocol.converter)
        self.publisher = EventPublisher(self.notifier)
        self.state_machine = RunStateMachine(clock=lambda: T0, listener=self.publisher)
        self.other = make_run("other")
        self.protocol.attach({"launch": Method(LaunchParams, self.launch)}, self.emit)
        self.notifier.attach(self.emit)

    def emit(self, body: bytes) -> None:
        self.sent.append(json.loads(body))

    async def launch(self, params: LaunchParams) -> dict[str, str]:
        run = make_run("mine")
        if params.mode == "background":
            with self.publisher.announcing(after_answer):
                self.state_machine.created(run)  # seq 1, emitted inside the launch
        else:
            self.state_machine.created(run)
        self.publisher.track(run, "tok")
        self.state_machine.emit(self.other, OutputEvent(index=0, text="another run goes on"))
        await asyncio.sleep(0)  # the run goes on while the handler waits (for the disk)
        self.state_machine.emit(run, OutputEvent(index=0, text="meanwhile"))
        if params.fail:
            raise RuntimeError("the write failed")
        return {"runId": run.run_id}

    async def call(self, params: dict[str, Any]) -> list[str]:
        """Send one `launch`; what was sent until its answer, named by kind and run."""
        self.protocol.receive(
            Parsed({"jsonrpc": "2.0", "id": 1, "method": "launch", "params": params})
        )
        await asyncio.wait_for(self.protocol.wait_answered(), 5)
        return [describe(message) for message in self.sent]


def describe(message: dict[str, Any]) -> str:
    if "id" in message:
        return "reply" if "result" in message else "error"
    params = message["params"]
    if message["method"] == "$/progress":
        return f"progress {params['value']['kind']}"
    return f"event {params['runId']} {params['seq']}"


@pytest.mark.parametrize("fail", [False, True])
async def test_a_background_launchs_notifications_follow_its_answer_and_no_other_run_waits(
    fail: bool,
) -> None:
    server = Server()
    assert await server.call({"mode": "background", "fail": fail}) == [
        "event other 1",  # not held: another run's
        "error" if fail else "reply",
        "event mine 1",
        "progress begin",
        "event mine 2",
    ]
    assert server.notifier.held == 0
    server.state_machine.emit(make_run("mine"), OutputEvent(index=0, text="later"))
    assert describe(server.sent[-1]) == "event mine 1"  # released for good: sent at once


async def test_a_task_mode_launch_streams_its_events_before_its_answer() -> None:
    server = Server()
    assert await server.call({"mode": "task"}) == [
        "event mine 1",
        "progress begin",
        "event other 1",
        "event mine 2",
        "reply",
    ]


def test_a_held_subject_keeps_its_notifications_in_order_until_released() -> None:
    sent: list[Any] = []
    notify = Notifier(make_protocol().converter)
    notify.attach(lambda body: sent.append(json.loads(body)["params"]))
    notify.hold("a")
    notify.hold("a")  # holding twice is holding once
    notify("run/event", {"n": 1}, about="a")
    notify("run/event", {"n": 2}, about="b")
    notify("run/event", {"n": 3})
    notify("run/event", {"n": 4}, about="a")
    assert sent == [{"n": 2}, {"n": 3}]
    notify.release("a")
    notify.release("a")  # releasing what is not held does nothing
    notify("run/event", {"n": 5}, about="a")
    assert sent == [{"n": 2}, {"n": 3}, {"n": 1}, {"n": 4}, {"n": 5}]
    assert notify.held == 0


def test_after_answer_outside_a_request_runs_at_once() -> None:
    ran: list[str] = []
    after_answer(lambda: ran.append("now"))
    assert ran == ["now"]


async def test_a_progress_begin_is_cancellable_and_its_token_names_only_the_very_value() -> None:
    server = Server()
    run = make_run("r")
    server.publisher.track(run, 5)
    assert server.publisher.runs_with_token(5) == ["r"]
    assert server.publisher.runs_with_token("5") == []
    assert server.sent[-1]["params"]["value"]["cancellable"] is True
