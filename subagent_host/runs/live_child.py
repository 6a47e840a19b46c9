"""One running child driven through its machine protocol: what a client says to it, and
what its conversation says back, carried out in order (protocol.md §23).

The child runner makes one `LiveChild` per driven attempt (an interactive child, or one
whose permissions someone but its CLI answers) and keeps it in its run's control while
the child runs. Requests come in from the methods (`send`, `interrupt`, `close`,
`permit`); each goes to the child's `Conversation` (backends/interactive/), and every
reaction the conversation returns, for a request or for a line the CLI printed
(`DrivenOutput` hands them over), is carried out here, one at a time, in order: bytes
to the CLI's stdin, a signal to its group, the child's turn (`turn` events, its
snapshot's `turn`), a message's state (`input` events), a permission asked or withdrawn
(`permission` events, the run's `pendingPermissions`), and its normalized agent events.

Its end is its supervision's (runs/child_runner.py): a close, its idle timeout after a
turn, and a one-shot driven child's only turn ending ask for it (`end`), as does a CLI
that broke its protocol. When the child has ended, `ended` drops the messages still
queued (never replayed into a later attempt) and rejects what still waits for an
answer: nothing pending outlives its child.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import attrs

from subagent_host.backends.base import KIND_EFFECTS, MAX_TURNS_LIMIT, Backend
from subagent_host.backends.cgroups import ticks_now
from subagent_host.backends.interactive.base import (
    OPENING,
    LeftRunning,
    MessageDelivered,
    MessageRefused,
    PermissionAsked,
    PermissionWithdrawn,
    ProtocolFailure,
    Reaction,
    Signal,
    TurnEnded,
    TurnEndedLeavingCommands,
    TurnStarted,
    Write,
)
from subagent_host.backends.interactive.driven_output import PROTOCOL_ERROR, DrivenOutput
from subagent_host.backends.supervisor import LEFTOVER_GRACE_S
from subagent_host.executors.base import ChildHandle
from subagent_host.planning.access import unpermitted_effects
from subagent_host.planning.plan import ChildPlan
from subagent_host.planning.views import Access
from subagent_host.runs.child_sink import ChildSink
from subagent_host.runs.settling import StopCause
from subagent_host.runs.state import ChildRun, Run, RunStateMachine, RunStatus
from subagent_host.values.choices import (
    Approvals,
    Delivery,
    DeliveryState,
    Effect,
    OptionKind,
    PermissionStage,
    Phase,
    TurnState,
)
from subagent_host.values.events import InputEvent, PermissionEvent, TurnEvent
from subagent_host.values.interaction import TurnInfo

logger = logging.getLogger(__name__)

CLOSED: Final = StopCause(RunStatus.COMPLETED, "closed")
"""A client closed it (`run/close`), or its only turn ended (a one-shot driven child)."""
IDLE: Final = StopCause(RunStatus.COMPLETED, "idle")
"""It waited for input for its `idleTimeoutMs` after a turn ended."""
MAX_TURNS: Final = StopCause(
    RunStatus.LIMIT_REACHED, MAX_TURNS_LIMIT, reached_limit=MAX_TURNS_LIMIT
)
"""It began one turn (an agent CLI: one model response) more than its `maxTurns`, or
was sent a message that would have begun one."""

HANDSHAKE_TIMEOUT_S: Final = 30.0
"""How long a driven child may take to start its first turn (its protocol's handshake:
an ACP agent's `initialize` and `session/new`), at most: its `stallTimeoutMs` when
shorter. One that has not by then fails `spawn-failed`: it never began its task."""
SPAWN_FAILED: Final = "spawn-failed"

AGENT_ERROR: Final = "agent-error"
"""A driven child whose CLI refused its first prompt (its reason: say, no API key)."""
ANSWERED_BY_POLICY: Final = "policy"
ANSWERED_BY_TIMEOUT: Final = "timeout"
ANSWERED_BY_END: Final = "ended"


class NotPending(KeyError):
    """No permission of that id waits for an answer (never asked, answered, timed out)."""


class LiveChild:
    """A running driven child: its conversation's requests and reactions, in order."""

    def __init__(
        self,
        run: Run,
        child: ChildRun,
        plan: ChildPlan,
        output: DrivenOutput,
        sink: ChildSink,
        state_machine: RunStateMachine,
        tools: Mapping[str, frozenset[Effect]],
        *,
        cancels_first: bool = False,
    ) -> None:
        self.run = run
        self.child = child
        self.plan = plan
        self.output = output
        self.conversation: Final = output.conversation
        self._sink = sink
        self._state_machine = state_machine
        self._tools = tools  # by name; a tool not named in it is known by its kind
        self.cancels_first = cancels_first
        """Whether a stop or a timeout first cancels its running turn (`cancel_turn`): an
        ACP agent's, whose `session/cancel` ends the turn's tools."""
        self._turn_end: asyncio.Future[None] | None = None  # done at the next turn's end
        self._loop = asyncio.get_running_loop()
        self._handle: ChildHandle | None = None
        self._texts: dict[str, str] = {}  # queued messages' text, by id, until delivered
        self._beyond_limit: dict[str, str] = {}  # messages a turn past `maxTurns` would take
        self._permissions: dict[str, tuple[str, PermissionAsked]] = {}  # wire id → driver's
        self._permission_timers: dict[str, asyncio.TimerHandle] = {}
        self._idle: asyncio.TimerHandle | None = None
        self._handshake: asyncio.TimerHandle | None = None
        self._turn_began: int | None = None  # clock ticks since boot: what its tools started after
        self._sweeps: set[asyncio.Task[int]] = set()
        self._end: Callable[[StopCause], None] | None = None
        self._ending: StopCause | None = None
        self.closing = False
        """A close was asked for (`run/close`, idle, the end of a one-shot driven turn)."""
        self.over = False
        """The child has ended: nothing more reaches it."""
        self.gone = asyncio.Event()
        """Set once the child has ended and what it left is settled (`ended`, `swept`)."""
        child.turn = initial_turn(plan)

    # --- its supervision ---------------------------------------------------------------

    def start(
        self, handle: ChildHandle, prompt: str | None, early: Sequence[EarlyMessage] = ()
    ) -> None:
        """The child's process is started: say the conversation's opening (its first
        prompt), then the messages sent before it started (each already `queued`, in
        order), then carry out every reaction as it comes."""
        self._handle = handle
        self.output.attach(self._react)
        bound = min(HANDSHAKE_TIMEOUT_S, self.plan.stall_timeout_ms / 1000)
        self._handshake = self._loop.call_later(bound, self._no_first_turn, bound)
        self.output.take(self.conversation.opening(prompt or ""))
        for message in early:
            self._send(message.message_id, message.text, message.delivery, told=True)
        if not self.conversation.turn_running:
            self._waiting()

    def supervise(self, end: Callable[[StopCause], None]) -> None:
        """Who ends the child (its supervision's first-wins settle); an end asked for
        before it began goes to it now."""
        self._end = end
        if self._ending is not None:
            end(self._ending)

    def ended(self) -> None:
        """The child's process is gone: drop what is queued, reject what is pending."""
        if self.over:
            return
        self.over = True
        self._cancel_idle()
        self._cancel_handshake()
        for message_id in self.conversation.queued():
            self._emit_input(message_id, DeliveryState.DROPPED, self._texts.pop(message_id, ""))
        for message_id, text in self._beyond_limit.items():
            self._emit_input(message_id, DeliveryState.DROPPED, text)
        for wire_id in list(self._permissions):
            self._settle_permission(wire_id, None, ANSWERED_BY_END, "the child ended")
        for task in self._sweeps:
            task.cancel()

    async def swept(self) -> None:
        """Wait for the leftovers being ended after an interrupted turn (bounded by their
        own stop sequence)."""
        try:
            if self._sweeps:
                await asyncio.gather(*self._sweeps, return_exceptions=True)
        finally:
            self.gone.set()

    # --- what a client asks ------------------------------------------------------------

    def send(self, text: str, delivery: Delivery) -> tuple[str, DeliveryState]:
        """A live message: its id, and whether it was written or waits for the turn."""
        message_id = new_message_id()
        return message_id, self._send(message_id, text, delivery)

    def _send(
        self, message_id: str, text: str, delivery: Delivery, *, told: bool = False
    ) -> DeliveryState:
        """`told`: its `queued` was said already (a message sent before the child started)."""
        self._cancel_idle()
        if self._turns_spent():
            return self._held_back(message_id, text, told=told)
        reactions, state = self.conversation.send(message_id, text, delivery)
        if state is DeliveryState.QUEUED:
            self._texts[message_id] = text
        if not (told and state is DeliveryState.QUEUED):
            self._emit_input(message_id, state, text)
        self.output.take(reactions)
        if not self.conversation.turn_running and not self.over:
            self._waiting()  # a message that started no turn: the wait starts again
        return state

    def _turns_spent(self) -> bool:
        """Whether a message now would begin a turn beyond the child's `maxTurns`."""
        limit = self.plan.max_turns
        turning = self.conversation.turn_running
        return limit is not None and not turning and self.output.turns >= limit

    def _held_back(self, message_id: str, text: str, *, told: bool) -> DeliveryState:
        """A message that would begin turn N + 1 of a child allowed N is never written
        (its model would answer it in full while the child is being stopped): the child
        ends `limit-reached` as that turn's start would end it, the message queued, then
        dropped with it."""
        self._beyond_limit[message_id] = text
        if not told:
            self._emit_input(message_id, DeliveryState.QUEUED, text)
        self._finish(MAX_TURNS)
        return DeliveryState.QUEUED

    def interrupt(self) -> bool:
        """End the current turn, not the child; False (nothing done) when none runs."""
        if not self.conversation.turn_running:
            return False
        self.output.take(self.conversation.interrupt())
        return True

    async def cancel_turn(self, wait_s: float, exited: asyncio.Future[None]) -> bool:
        """Before its tree is ended (a stop, its timeout): cancel the running turn through
        its protocol, and wait up to `wait_s` for the turn to end (or the child to exit).
        False when no turn ran, or it did not end in time."""
        if self.over or not self.conversation.turn_running:
            return False
        over: asyncio.Future[None] = self._loop.create_future()
        self._turn_end = over

        def on_exit(_: object) -> None:
            if not over.done():
                over.set_result(None)

        exited.add_done_callback(on_exit)
        try:
            self.output.take(self.conversation.interrupt())
            await asyncio.wait({over}, timeout=wait_s)
        finally:
            exited.remove_done_callback(on_exit)
            self._turn_end = None
        return over.done()

    def close(self, cause: StopCause = CLOSED) -> None:
        """End the conversation: its stdin closes, and it has FINISHED_GRACE_S to exit."""
        if not self.closing:
            self.closing = True
            self.output.closed = True  # from now on, its exit is the close's
            self._cancel_idle()
            self._finish(cause)

    def permit(self, wire_id: str, option_id: str, who: str) -> OptionKind:
        """Answer a pending permission. NotPending: none of that id; ValueError: an option
        it did not offer."""
        if wire_id not in self._permissions:
            raise NotPending(wire_id)
        _, asked = self._permissions[wire_id]
        chosen = next((o for o in asked.options if o.option_id == option_id), None)
        if chosen is None:
            offered = ", ".join(o.option_id for o in asked.options)
            raise ValueError(f"permission {wire_id} offers no option {option_id!r} ({offered})")
        self._settle_permission(wire_id, option_id, who)
        return chosen.kind

    def pending(self) -> list[str]:
        return list(self._permissions)

    # --- what the conversation says ----------------------------------------------------

    def _react(self, reaction: Reaction) -> None:
        match reaction:
            case Write(data=data):
                if self._handle is not None and not self.over:
                    self._handle.write_input(data)
            case Signal(signum=signum):
                if self._handle is not None and not self.over:
                    self._handle.signal_group(signum)
            case TurnStarted():
                self._cancel_idle()
                self._cancel_handshake()
                self._turn_began = ticks_now()
                if self.plan.interactive:  # another child has no turns to show (§12)
                    count = self.child.turn.count if self.child.turn else 0
                    self.child.turn = TurnInfo(count=count + 1, state=TurnState.RUNNING)
                self._emit(TurnEvent(index=self.child.index, phase=Phase.START))
            case TurnEnded(stop_reason=reason):
                self._turn_ended(reason, reaction)
            case PermissionAsked():
                self._asked(reaction)
            case PermissionWithdrawn(permission_id=driver_id, reason=reason):
                for wire_id, (known, _) in list(self._permissions.items()):
                    if known == driver_id:
                        self._withdrawn(wire_id, reason)
            case MessageDelivered(message_id=message_id):
                self._emit_input(
                    message_id, DeliveryState.DELIVERED, self._texts.pop(message_id, "")
                )
            case MessageRefused(message_id=message_id, reason=reason):
                if message_id == OPENING:
                    # Its first prompt never reached the model: the child cannot do its task.
                    self._finish(
                        StopCause(RunStatus.FAILED, "agent-error", error=("agent-error", reason))
                    )
                else:
                    text = self._texts.pop(message_id, "")
                    self._emit_input(message_id, DeliveryState.REFUSED, text, reason)
            case ProtocolFailure(reason=reason):
                self._finish(
                    StopCause(RunStatus.FAILED, PROTOCOL_ERROR, error=(PROTOCOL_ERROR, reason))
                )
            case _:
                self._sink.report_events([reaction])

    def _turn_ended(self, reason: str, ended: TurnEnded) -> None:
        if self._turn_end is not None and not self._turn_end.done():
            self._turn_end.set_result(None)
        if self.plan.interactive:
            count = self.child.turn.count if self.child.turn else 1
            self.child.turn = TurnInfo(count=count, state=TurnState.WAITING)
        self._emit(TurnEvent(index=self.child.index, phase=Phase.END, stop_reason=reason))
        if isinstance(ended, TurnEndedLeavingCommands) and self._handle is not None:
            self._sweep(ended.left_running)
        if not self.plan.interactive:
            self.close()  # a one-shot child driven for its permissions: its turn was all
        elif not self.conversation.turn_running:
            self._waiting()

    def _sweep(self, left: tuple[LeftRunning, ...]) -> None:
        """End what the interrupted turn left running: what was started below the CLI since
        the turn began (the CLI's own processes, a launcher's binary, are older)."""
        assert self._handle is not None
        logger.info(
            "a turn of %r ended leaving %d tool(s) running: ending what is left of them",
            self._handle,
            len(left),
            extra=self._handle.log_fields,
        )
        ending = self._handle.end_descendants(LEFTOVER_GRACE_S, self._turn_began)
        task = asyncio.ensure_future(ending)
        self._sweeps.add(task)
        task.add_done_callback(self._sweeps.discard)

    def _asked(self, asked: PermissionAsked) -> None:
        wire_id = f"{self.child.index}.{asked.permission_id}"
        self._permissions[wire_id] = (asked.permission_id, asked)
        told = self._emit_permission(wire_id, asked, PermissionStage.ASKED)
        if self.plan.approvals is Approvals.CLIENT:
            # Listed as the event says it, so a snapshot and a client reading the events
            # agree on every field.
            self.run.pending_permissions[wire_id] = told.pending()
            timeout_ms = self.plan.permission_timeout_ms or 0
            self._permission_timers[wire_id] = self._loop.call_later(
                timeout_ms / 1000,
                self._settle_permission,
                wire_id,
                None,
                ANSWERED_BY_TIMEOUT,
                f"unanswered for {timeout_ms} ms",
            )
            return
        # The host answers from the child's access: a tool whose effects exceed it is refused.
        effects = self._tools.get(asked.name) or KIND_EFFECTS[asked.kind]
        beyond = unpermitted_effects(self.plan.access or Access(), {asked.name: list(effects)})
        if beyond[asked.name]:
            reason = "its access does not permit " + ", ".join(e.value for e in beyond[asked.name])
            self._settle_permission(wire_id, None, ANSWERED_BY_POLICY, reason)
        else:
            allow = _option(asked, allow=True)
            self._settle_permission(wire_id, allow, ANSWERED_BY_POLICY, "within its access")

    def _settle_permission(
        self, wire_id: str, option_id: str | None, who: str, reason: str | None = None
    ) -> None:
        """Answer a permission (None: its reject option) and say so; the CLI hears the
        answer unless the child is over."""
        entry = self._permissions.pop(wire_id, None)
        if entry is None:
            return
        driver_id, asked = entry
        self.run.pending_permissions.pop(wire_id, None)
        timer = self._permission_timers.pop(wire_id, None)
        if timer is not None:
            timer.cancel()
        chosen = option_id if option_id is not None else _option(asked, allow=False)
        self._emit_permission(wire_id, asked, PermissionStage.ANSWERED, chosen, who, reason)
        if not self.over and chosen is not None:
            try:
                self.output.take(self.conversation.answer(driver_id, chosen))
            except (KeyError, ValueError):
                logger.info("the answer to permission %s is no longer wanted", wire_id)

    def _withdrawn(self, wire_id: str, reason: str) -> None:
        _, asked = self._permissions.pop(wire_id)
        self.run.pending_permissions.pop(wire_id, None)
        timer = self._permission_timers.pop(wire_id, None)
        if timer is not None:
            timer.cancel()
        self._emit_permission(wire_id, asked, PermissionStage.WITHDRAWN, reason=reason)

    # --- helpers -----------------------------------------------------------------------

    def _waiting(self) -> None:
        """It waits for input: closed after its idle timeout unless a message comes."""
        self._cancel_idle()
        if self.plan.idle_timeout_ms is not None and not self.closing:
            self._idle = self._loop.call_later(self.plan.idle_timeout_ms / 1000, self.close, IDLE)

    def _no_first_turn(self, bound: float) -> None:
        self._handshake = None
        reason = (
            f"{self.plan.backend} did not begin its first turn within {bound:g} s of its start "
            "(its protocol's handshake went unanswered)"
        )
        self._finish(StopCause(RunStatus.FAILED, SPAWN_FAILED, error=(SPAWN_FAILED, reason)))

    def _cancel_handshake(self) -> None:
        if self._handshake is not None:
            self._handshake.cancel()
            self._handshake = None

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _finish(self, cause: StopCause) -> None:
        if self._ending is None:
            self._ending = cause
            if self._end is not None:
                self._end(cause)

    def _emit(self, event: TurnEvent | InputEvent | PermissionEvent) -> None:
        self._state_machine.emit(self.run, event)

    def _emit_input(
        self, message_id: str, state: DeliveryState, text: str, reason: str | None = None
    ) -> None:
        self._emit(
            InputEvent(
                index=self.child.index, message_id=message_id, state=state, text=text,
                reason=reason,
            )
        )  # fmt: skip

    def _emit_permission(
        self,
        wire_id: str,
        asked: PermissionAsked,
        stage: PermissionStage,
        option_id: str | None = None,
        who: str | None = None,
        reason: str | None = None,
    ) -> PermissionEvent:
        event = PermissionEvent(
            index=self.child.index,
            permission_id=wire_id,
            stage=stage,
            name=asked.name,
            kind=asked.kind,
            summary=asked.summary,
            options=asked.options,
            tool_id=asked.tool_id,
            option_id=option_id,
            answered_by=who,
            reason=reason,
        )
        self._emit(event)
        return event


def named_tools(backend: Backend) -> Mapping[str, frozenset[Effect]]:
    """The tools a policy answer reads a permission's effects from by the tool's name (any
    other by its kind). None of a backend whose catalog lists kinds (an ACP agent's), which
    a tool's own name (say, one called `read` that runs commands) must not be mistaken for."""
    return {} if backend.tools_by_kind else backend.tools


@attrs.frozen
class EarlyMessage:
    """A live message sent to an interactive child before it started: `queued`, and
    said to it once it has (runs/live_requests.py keeps them in the run's control)."""

    message_id: str
    text: str
    delivery: Delivery


def new_message_id() -> str:
    return f"msg-{secrets.token_hex(6)}"


def initial_turn(plan: ChildPlan) -> TurnInfo | None:
    """An interactive child's turns before it began any (None for another child)."""
    return TurnInfo(count=0, state=TurnState.WAITING) if plan.interactive else None


def _option(asked: PermissionAsked, *, allow: bool) -> str | None:
    """The permission's once-only option that allows (or rejects), else any that does."""
    wanted = OptionKind.ALLOW_ONCE if allow else OptionKind.REJECT_ONCE
    for kinds in ((wanted,), (OptionKind.ALLOW_ALWAYS,) if allow else (OptionKind.REJECT_ALWAYS,)):
        for option in asked.options:
            if option.kind in kinds:
                return option.option_id
    return None
