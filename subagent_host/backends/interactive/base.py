"""What every interactive conversation with an agent CLI says and hears, as types.

A `Conversation` is sans-I/O: it never reads or writes a pipe. Its caller (the child's
supervision) hands it each line the CLI prints (`on_line`) and each request of a client
(`opening`, `send`, `interrupt`, `answer`), and carries out the `Reaction`s it returns
in order: bytes to write to the CLI's stdin, and what happened
(a turn started or ended, a permission is asked, the normalized agent events of
backends/events.py). Keeping the protocol free of I/O lets one module per CLI be
tested line by line, and leaves stdin, signals and timeouts to the one code that owns
the child's process.

Every driver says the same things the same way, so the supervision needs not know
which CLI it talks to: who answers permissions is a launch-level `Approvals` (a CLI
that cannot ask refuses any but `cli`, `approvals-unsupported`); a permission no
longer answerable is a `PermissionWithdrawn`; a message the CLI refuses while living
on is a `MessageRefused` (a `ProtocolFailure` is for a CLI that broke its protocol);
a turn's end that may have left tools running is a `TurnEndedLeavingCommands`; and
`session_id` is what a resume continues.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import Final, Protocol

import attrs

from subagent_host.backends.events import AgentEvent, ToolKind

# Declared with the wire's other words (values/choices.py); the drivers name them from here.
from subagent_host.values.choices import Approvals as Approvals
from subagent_host.values.choices import Delivery as Delivery
from subagent_host.values.choices import DeliveryState as DeliveryState
from subagent_host.values.choices import OptionKind as OptionKind
from subagent_host.values.interaction import PermissionOption as PermissionOption

APPROVALS_UNSUPPORTED: Final = "approvals-unsupported"


def approvals_supported(backend: str, approvals: Approvals, supported: Set[Approvals]) -> None:
    """Refuse (ValueError naming `approvals-unsupported`) approvals a CLI cannot ask."""
    if approvals not in supported:
        raise ValueError(
            f"{APPROVALS_UNSUPPORTED}: {backend} cannot ask before its tools run "
            f"(approvals {approvals.value!r}; it takes {sorted(a.value for a in supported)})"
        )


@attrs.frozen
class Write:
    """Bytes to write to the CLI's stdin, as they are (each message ends its own line)."""

    data: bytes


@attrs.frozen
class Signal:
    """A signal for the child's process group, as a terminal's Ctrl-C sends one (a
    plain command's interrupt: it has no protocol to ask in)."""

    signum: int


@attrs.frozen
class TurnStarted:
    """The CLI began a turn: its model works on a message."""


@attrs.frozen
class TurnEnded:
    """The CLI ended a turn and waits for input. `stop_reason`: `end_turn`,
    `interrupted`, or the CLI's own reason when it says one (`error`, `max_turns`...)."""

    stop_reason: str


@attrs.frozen
class LeftRunning:
    """A tool the CLI started in a turn that ended without its result."""

    tool_id: str
    summary: str | None


@attrs.frozen
class TurnEndedLeavingCommands(TurnEnded):
    """A turn ended that may have left tools running: a CLI whose interrupt does not
    always end the running tool says so with this form of `TurnEnded`. `left_running`
    names the tools the CLI announced and did not finish; it may name none (a tool
    interrupted before it was announced) or one the CLI did end after all. The
    supervision ends the child tree's leftovers either way (whatever is left is a
    descendant of the CLI's process); a caller that knows only `TurnEnded` still reads
    the turn's end from it."""

    left_running: tuple[LeftRunning, ...] = ()


@attrs.frozen
class PermissionAsked:
    """The CLI asks before it runs a tool; `answer(permission_id, option_id)` replies."""

    permission_id: str
    tool_id: str | None
    name: str
    kind: ToolKind
    summary: str
    options: tuple[PermissionOption, ...]


@attrs.frozen
class PermissionWithdrawn:
    """A `PermissionAsked` is no longer answerable: the CLI withdrew it (an interrupt)
    or its turn ended. `reason` says which, in words."""

    permission_id: str
    reason: str


@attrs.frozen
class MessageRefused:
    """The CLI refused one message (`message_id`, the `send`'s, or `opening` for the
    first prompt) and lives on: the message never reaches the model."""

    message_id: str
    reason: str


OPENING: Final = "opening"
"""The `message_id` of the first prompt, in a `MessageRefused`."""


@attrs.frozen
class MessageDelivered:
    """A message a `send` queued was written to the CLI (its turn came)."""

    message_id: str


@attrs.frozen
class ProtocolFailure:
    """The CLI broke its protocol (a line that cannot be what it must be): the child
    fails with `reason`; the conversation says nothing more."""

    reason: str


Reaction = (
    Write
    | Signal
    | TurnStarted
    | TurnEnded
    | PermissionAsked
    | PermissionWithdrawn
    | MessageDelivered
    | MessageRefused
    | ProtocolFailure
    | AgentEvent
)


class Conversation(Protocol):
    """One interactive child's protocol state (one per started CLI process)."""

    @property
    def turn_running(self) -> bool:
        """True from a turn's start until its end."""
        ...

    @property
    def session_id(self) -> str | None:
        """The CLI's session (what a resume continues), once the CLI said it."""
        ...

    def opening(self, prompt: str) -> Sequence[Reaction]:
        """What to write first: the protocol's handshake, if any, and the first turn's
        prompt (or the handshake alone, the prompt following from `on_line` once the
        CLI has answered it)."""
        ...

    def on_line(self, line: bytes) -> Sequence[Reaction]:
        """One line of the CLI's stdout (without its newline)."""
        ...

    def send(
        self, message_id: str, text: str, delivery: Delivery
    ) -> tuple[Sequence[Reaction], DeliveryState]:
        """A live message: written now (`delivered`), or kept until the current turn ends
        (`queued`; a `MessageDelivered` follows when it is written)."""
        ...

    def interrupt(self) -> Sequence[Reaction]:
        """End the current turn, not the CLI (nothing when no turn runs)."""
        ...

    def answer(self, permission_id: str, option_id: str) -> Sequence[Reaction]:
        """Reply to a `PermissionAsked` (KeyError: no such pending permission; ValueError:
        an option it did not offer)."""
        ...

    def queued(self) -> Sequence[str]:
        """The ids of the messages still queued (they are dropped when the child ends)."""
        ...
