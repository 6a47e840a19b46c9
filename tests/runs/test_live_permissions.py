"""Permissions of a live child: asked, answered by a client, by policy, by a timeout,
at the child's end; and the refusals of answers that cannot be given.

The conversation here is a scripted one (a CLI that asks on the line `ASK <tool>`),
so that every path runs without a model; the real CLIs' permissions are proven end
to end in tests/e2e/.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Final

import pytest

from subagent_host.backends.acp import AcpBackend
from subagent_host.backends.events import ToolKind
from subagent_host.backends.interactive.base import (
    Approvals,
    Delivery,
    DeliveryState,
    PermissionAsked,
    PermissionOption,
    Reaction,
    TurnEnded,
    TurnStarted,
    Write,
)
from subagent_host.backends.interactive.driven_output import DrivenOutput
from subagent_host.errors import RequestRefused
from subagent_host.planning.plan import ChildPlan
from subagent_host.planning.request import FilesystemAccess
from subagent_host.planning.views import Access
from subagent_host.runs import live_requests
from subagent_host.runs.child_sink import ChildSink
from subagent_host.runs.live_child import LiveChild, named_tools
from subagent_host.runs.run_control import RunControl
from subagent_host.runs.settling import StopCause
from subagent_host.runs.state import ChildRun, Run, RunEvent, RunStateMachine
from subagent_host.values import RunKind
from subagent_host.values.choices import Effect, OptionKind, PermissionStage
from subagent_host.values.error_data import Refusal
from subagent_host.values.events import PermissionEvent

OPTIONS: Final = (
    PermissionOption("yes", "Allow", OptionKind.ALLOW_ONCE),
    PermissionOption("always", "Allow always", OptionKind.ALLOW_ALWAYS),
    PermissionOption("no", "Deny", OptionKind.REJECT_ONCE),
)
KINDS: Final = {"Read": ToolKind.READ, "Write": ToolKind.EDIT, "Bash": ToolKind.EXECUTE}


class AskingConversation:
    """A CLI that asks before each tool: `ASK <tool>` asks, `DONE` ends the turn."""

    kinds: Mapping[str, ToolKind] = KINDS

    def __init__(self) -> None:
        self.turn_running = False
        self.session_id = None
        self.answers: list[tuple[str, str]] = []
        self._asked = 0

    def opening(self, prompt: str) -> Sequence[Reaction]:
        self.turn_running = True
        return [Write(prompt.encode() + b"\n"), TurnStarted()]

    def on_line(self, line: bytes) -> Sequence[Reaction]:
        word, _, tool = line.decode().partition(" ")
        if word == "ASK":
            self._asked += 1
            asked = PermissionAsked(f"p{self._asked}", None, tool, self.kinds[tool], "x", OPTIONS)
            return [asked]
        if word == "DONE":
            self.turn_running = False
            return [TurnEnded("end_turn")]
        return []

    def send(
        self, message_id: str, text: str, delivery: Delivery
    ) -> tuple[Sequence[Reaction], DeliveryState]:
        return [], DeliveryState.QUEUED

    def interrupt(self) -> Sequence[Reaction]:
        return []

    def answer(self, permission_id: str, option_id: str) -> Sequence[Reaction]:
        self.answers.append((permission_id, option_id))
        return [Write(f"{permission_id}={option_id}\n".encode())]

    def queued(self) -> Sequence[str]:
        return []


class Handle:
    """What the live child writes to, in place of a process's stdin."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.log_fields: dict[str, object] = {}

    def write_input(self, data: bytes) -> None:
        self.written += data


class Live:
    """One live child with an asking conversation, its run and its events."""

    def __init__(
        self,
        approvals: Approvals,
        access: Access | None = None,
        timeout_ms: int = 60_000,
        tools: Mapping[str, frozenset[Effect]] | None = None,
        conversation: AskingConversation | None = None,
    ) -> None:
        self.events: list[RunEvent] = []
        self.changed = asyncio.Event()
        machine = RunStateMachine(listener=self._record)
        self.run = Run(
            run_id="r-live-permissions",
            session_id="s1",
            kind=RunKind.SINGLE,
            fingerprint="sha256:v1:" + "0" * 64,
            created_at=machine.now(),
            children=[ChildRun(index=0, backend="claude")],
        )
        plan = ChildPlan(
            backend="claude",
            cwd="/",
            timeout_ms=60_000,
            stall_timeout_ms=60_000,
            interactive=True,
            approvals=approvals,
            idle_timeout_ms=600_000,
            permission_timeout_ms=timeout_ms if approvals is Approvals.CLIENT else None,
            access=access,
        )
        self.conversation = conversation or AskingConversation()
        output = DrivenOutput("claude", self.conversation)
        sink = ChildSink(output, None, lambda _text: None)
        if tools is None:
            tools = {
                "Read": frozenset({Effect.FILESYSTEM_READ}),
                "Write": frozenset({Effect.FILESYSTEM_WRITE}),
            }
        self.child = LiveChild(self.run, self.run.children[0], plan, output, sink, machine, tools)
        self.control = RunControl(grace_s=1.0)
        self.control.live[0] = self.child
        self.handle = Handle()
        self.ends: list[StopCause] = []
        self.child.start(self.handle, "go")  # type: ignore[arg-type]
        self.child.supervise(self.ends.append)
        self.output = output

    def _record(self, _run: Run, event: RunEvent) -> None:
        self.events.append(event)
        self.changed.set()

    def line(self, text: str) -> None:
        self.output.on_stdout(text.encode() + b"\n")

    def permissions(self) -> list[tuple[str, PermissionStage, str | None, str | None]]:
        return [
            (e.payload.permission_id, e.payload.stage, e.payload.option_id, e.payload.answered_by)
            for e in self.events
            if isinstance(e.payload, PermissionEvent)
        ]

    def permit(self, permission_id: str, option_id: str) -> OptionKind:
        return live_requests.permit(self.run, self.control, permission_id, option_id, "client:test")


async def test_a_client_answers_what_is_pending_once() -> None:
    live = Live(Approvals.CLIENT)
    live.line("ASK Write")
    assert list(live.run.pending_permissions) == ["0.p1"]
    assert live.permit("0.p1", "yes") is OptionKind.ALLOW_ONCE
    assert live.conversation.answers == [("p1", "yes")]
    assert live.run.pending_permissions == {}
    assert live.permissions() == [
        ("0.p1", PermissionStage.ASKED, None, None),
        ("0.p1", PermissionStage.ANSWERED, "yes", "client:test"),
    ]
    with pytest.raises(RequestRefused) as twice:
        live.permit("0.p1", "yes")
    assert twice.value.data == Refusal("not-pending", live.run.run_id, permission_id="0.p1")
    with pytest.raises(RequestRefused):
        live.permit("0.nope", "yes")
    assert live.conversation.answers == [("p1", "yes")]  # nothing more reached the CLI


async def test_an_option_not_offered_is_refused_and_the_permission_stays_pending() -> None:
    live = Live(Approvals.CLIENT)
    live.line("ASK Bash")
    with pytest.raises(ValueError, match="offers no option 'maybe'"):
        live.permit("0.p1", "maybe")
    assert list(live.run.pending_permissions) == ["0.p1"]
    assert live.permit("0.p1", "no") is OptionKind.REJECT_ONCE


async def test_unanswered_past_its_timeout_the_answer_is_reject() -> None:
    live = Live(Approvals.CLIENT, timeout_ms=50)
    live.line("ASK Write")
    async with asyncio.timeout(10):
        while live.run.pending_permissions:  # the timeout's answer is an event
            live.changed.clear()
            await live.changed.wait()
    assert live.conversation.answers == [("p1", "no")]
    assert live.permissions()[-1] == ("0.p1", PermissionStage.ANSWERED, "no", "timeout")
    with pytest.raises(RequestRefused):
        live.permit("0.p1", "yes")  # after its timeout: no longer pending


async def test_what_is_pending_when_the_child_ends_is_rejected_without_a_word_to_it() -> None:
    live = Live(Approvals.CLIENT)
    live.line("ASK Write")
    live.child.ended()
    assert live.permissions()[-1] == ("0.p1", PermissionStage.ANSWERED, "no", "ended")
    assert live.conversation.answers == []  # the CLI is gone: nothing is written
    assert live.run.pending_permissions == {}


@pytest.mark.parametrize(
    ("filesystem", "tool", "answer"),
    [
        (FilesystemAccess.READ, "Read", "yes"),
        (FilesystemAccess.READ, "Write", "no"),
        (FilesystemAccess.WRITE, "Write", "yes"),
        (FilesystemAccess.WRITE, "Bash", "yes"),
    ],
)
async def test_policy_answers_from_the_access_and_asks_nobody(
    filesystem: FilesystemAccess, tool: str, answer: str
) -> None:
    live = Live(Approvals.POLICY, access=Access(filesystem=filesystem))
    live.line(f"ASK {tool}")
    assert live.run.pending_permissions == {}
    assert live.conversation.answers == [("p1", answer)]
    assert live.permissions()[-1][1:] == (PermissionStage.ANSWERED, answer, "policy")


class AcpLikeConversation(AskingConversation):
    """An ACP agent's tools: each its own name and one of ACP's kinds; its interrupt ends
    the turn when the agent answers (`DONE`), as `session/cancel` does."""

    kinds: Mapping[str, ToolKind] = {
        "read": ToolKind.EXECUTE,  # a name that is another kind's: its kind decides
        "read_file": ToolKind.READ,
        "write_file": ToolKind.EDIT,
        "mystery": ToolKind.OTHER,
    }

    def interrupt(self) -> Sequence[Reaction]:
        return [Write(b"cancel\n")] if self.turn_running else []


@pytest.mark.parametrize(
    ("tool", "answer"),
    [("read", "no"), ("read_file", "yes"), ("write_file", "no"), ("mystery", "no")],
)
async def test_policy_answers_an_acp_agent_by_the_kind_of_its_tool(tool: str, answer: str) -> None:
    tools = named_tools(AcpBackend("some-agent", "some-agent"))
    live = Live(
        Approvals.POLICY,
        access=Access(filesystem=FilesystemAccess.READ),
        tools=tools,
        conversation=AcpLikeConversation(),
    )
    live.line(f"ASK {tool}")
    assert live.conversation.answers == [("p1", answer)]
    assert live.permissions()[-1][1:] == (PermissionStage.ANSWERED, answer, "policy")


async def test_a_cancelled_turn_is_waited_for_boundedly_before_the_tree_is_ended() -> None:
    live = Live(Approvals.CLI, conversation=AcpLikeConversation())
    exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    cancelling = asyncio.ensure_future(live.child.cancel_turn(30.0, exited))
    await asyncio.sleep(0)  # the cancel is written before the agent answers it
    assert live.handle.written.endswith(b"cancel\n") and not cancelling.done()
    live.line("DONE")  # the agent ends the cancelled turn
    assert await cancelling is True
    # No turn runs: nothing to cancel, nothing waited for.
    assert await live.child.cancel_turn(30.0, exited) is False
    # A turn that does not end in time is given up on; an exit ends the wait too.
    live.conversation.turn_running = True
    assert await live.child.cancel_turn(0.01, exited) is False
    exited.set_result(None)
    assert await live.child.cancel_turn(30.0, exited) is True
