"""What a run tells as it goes: one tagged union of event types, from the state machine to the wire.

Each `run/event` (protocol.md §11) is one of the classes below, told apart by its
`type` tag (a class variable, not a field: the class is the tag). The state machine
appends them (`runs/state.py`, as a `RunEvent`'s `payload` with its `seq` and time),
the store keeps them (`store/rows.py`, in the stored format of earlier versions), and
the wire sends their fields beside `runId`, `seq`, `type` and `at`; the schema's
discriminated `oneOf` is generated from these classes. A new event is one class here,
added to `Event` and `EVENT_TYPES`.

Fields are declared in the order they are stored and sent (a base's first: every
event of a child starts with its `index`); a field with a default of None is
optional (left out when None), every other is always carried. Keyword-only, so
that adding a field never shifts another. Each field's description is the
schema's; where several types share a field the first type's is the flat
`properties`' one. Imports nothing of ours but the values.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Generic, TypeVar, cast

import attrs

from subagent_host.values import RunStatus
from subagent_host.values.choices import DeliveryState, PermissionStage, PlanPriority, PlanStatus

# Declared with the wire's other words; named from here where events are made.
from subagent_host.values.choices import Phase as Phase
from subagent_host.values.choices import ToolKind as ToolKind
from subagent_host.values.facts import OutputInfo, Usage
from subagent_host.values.interaction import PendingPermission, PermissionOption


@attrs.frozen(kw_only=True)
class StatusEvent:
    """The run's status changed."""

    type: ClassVar[str] = "status"
    status: RunStatus
    """The run's new status (a `status` event) or the child's (a `child` event)."""
    output: OutputInfo | None = None
    """A terminal `status` event: the run's final output as its snapshot (and a `task`-mode answer)
    carries it, capped alike; absent when the run has none."""


@attrs.frozen(kw_only=True)
class _OfChild:
    """An event of one child: every type but `status`."""

    index: int
    """The child it concerns (every event but `status`)."""


@attrs.frozen(kw_only=True)
class ChildEvent(_OfChild):
    """A child's status changed."""

    type: ClassVar[str] = "child"
    status: RunStatus
    """The child's new status."""


@attrs.frozen(kw_only=True)
class _ChildText(_OfChild):
    """Text of one child, as it came."""

    text: str
    """What the child printed (`output` its stdout, `stderr` its stderr: UTF-8, split where it
    arrived), a backend's short summary of what it does (`activity`), or the assistant's text
    (`message`: a delta or a whole block)."""


@attrs.frozen(kw_only=True)
class OutputEvent(_ChildText):
    """What a child printed on its stdout, split where it arrived."""

    type: ClassVar[str] = "output"


@attrs.frozen(kw_only=True)
class StderrEvent(_ChildText):
    """What a child printed on its stderr, split where it arrived."""

    type: ClassVar[str] = "stderr"


@attrs.frozen(kw_only=True)
class ActivityEvent(_ChildText):
    """A backend's short summary of what a child does."""

    type: ClassVar[str] = "activity"


@attrs.frozen(kw_only=True)
class MessageEvent(_ChildText):
    """An agent child's assistant text: a delta or a whole block."""

    type: ClassVar[str] = "message"
    final: bool | None = None
    """`message`: true on the last text of a model response (its text may be empty)."""


@attrs.frozen(kw_only=True)
class ToolEvent(_OfChild):
    """An agent child's tool call began (`start`) or its result is back (`end`)."""

    type: ClassVar[str] = "tool"
    phase: Phase
    """`tool`: `start` or `end`."""
    tool_id: str
    """`tool`: the CLI's own id of the call (its `start` and `end` carry the same)."""
    name: str
    """`tool`: the CLI's own name of the tool (`bash`, `Bash`, `shell`, ...)."""
    kind: ToolKind
    """`tool`: what the tool does, as ACP's tool kinds say it (the same for every CLI)."""
    summary: str | None = None
    """`tool` `start`: one line (at most 200 characters) of its input: a command, a path, a
    pattern; never file contents."""
    is_error: bool | None = None
    """`tool` `end`: whether the tool reported a failure."""


@attrs.frozen(kw_only=True)
class UsageEvent(_OfChild):
    """An agent child's usage so far, whenever it changed."""

    type: ClassVar[str] = "usage"
    usage: Usage
    """`usage`: the child's tokens (and cost where the CLI reports one) so far."""


@attrs.frozen(kw_only=True)
class TurnEvent(_OfChild):
    """An interactive child began a turn (`start`), or ended one and waits (`end`)."""

    type: ClassVar[str] = "turn"
    phase: Phase
    """`turn`: `start` or `end`."""
    stop_reason: str | None = None
    """`turn` `end`: `end_turn`, `interrupted`, or the CLI's own reason (`error`, ...)."""


@attrs.frozen(kw_only=True)
class InputEvent(_OfChild):
    """A live message to an interactive child changed state."""

    type: ClassVar[str] = "input"
    message_id: str
    """`input`: the id `run/send` answered."""
    state: DeliveryState
    """`input`: `delivered`, `queued`, `dropped` (still queued when the child ended) or
    `refused` (by the CLI)."""
    text: str
    """`input`: the message (a `message` event's text is the assistant's)."""
    reason: str | None = None
    """`input` `refused`: why, in the CLI's words."""


@attrs.frozen(kw_only=True)
class PermissionEvent(_OfChild):
    """An interactive child asks before a tool runs (`asked`), or its ask was answered or
    withdrawn."""

    type: ClassVar[str] = "permission"
    permission_id: str
    """`permission`: what `run/permit` names."""
    stage: PermissionStage
    """`permission`: `asked`, `answered` or `withdrawn`."""
    name: str
    """`permission`: the CLI's own name of the tool."""
    kind: ToolKind
    """`permission`: what the tool does, in ACP's tool kinds."""
    summary: str
    """`permission`: one line of the tool's input (a command, a path); never file contents."""
    options: tuple[PermissionOption, ...]
    """`permission`: the answers it offers."""
    tool_id: str | None = None
    """`permission`: the CLI's own id of the tool call, when it gave one."""
    option_id: str | None = None
    """`permission` `answered`: the answer chosen."""
    answered_by: str | None = None
    """`permission` `answered`: who answered: `client` (and which, e.g. `client:vscode`),
    `policy`, `timeout` (unanswered for its `permissionTimeoutMs`: rejected) or `ended`
    (the child ended first: rejected)."""
    reason: str | None = None
    """`permission` `answered` by `policy`, `withdrawn`: why, in words."""

    def pending(self) -> PendingPermission:
        """The permission this `asked` event tells of, as the run's `pendingPermissions`
        lists it: the one conversion every client of the events makes (the MCP face, the
        terminal, the client library) and the server's own list is made with.

        ValueError: an `answered` or `withdrawn` event, which makes no pending permission.
        """
        if self.stage is not PermissionStage.ASKED:
            raise ValueError(f"a {self.stage.value} permission event is not pending")
        return PendingPermission(
            index=self.index,
            permission_id=self.permission_id,
            tool_id=self.tool_id,
            name=self.name,
            kind=self.kind,
            summary=self.summary,
            options=self.options,
        )


@attrs.frozen(kw_only=True)
class PlanEntry:
    """One step of an agent's plan (ACP's `PlanEntry`)."""

    content: str
    """What the step is, in the agent's words."""
    priority: PlanPriority
    """`high`, `medium` or `low`."""
    status: PlanStatus
    """`pending`, `in_progress` or `completed`."""


@attrs.frozen(kw_only=True)
class PlanEvent(_OfChild):
    """An agent child's plan, whole, each time the agent changed it."""

    type: ClassVar[str] = "plan"
    entries: tuple[PlanEntry, ...]
    """`plan`: every entry of the plan, in the agent's order: each `plan` event replaces
    the one before (an empty list: the agent dropped its plan)."""


Event = (
    StatusEvent
    | ChildEvent
    | OutputEvent
    | StderrEvent
    | ActivityEvent
    | MessageEvent
    | ToolEvent
    | UsageEvent
    | TurnEvent
    | InputEvent
    | PermissionEvent
    | PlanEvent
)
"""One `run/event`'s own fields, by type."""

EVENT_TYPES: Final[tuple[type[Event], ...]] = (
    StatusEvent,
    ChildEvent,
    OutputEvent,
    StderrEvent,
    ActivityEvent,
    MessageEvent,
    ToolEvent,
    UsageEvent,
    TurnEvent,
    InputEvent,
    PermissionEvent,
    PlanEvent,
)
"""Every class of `Event`, in the order the protocol lists them."""

EVENT_CLASSES: Final[Mapping[str, type[Event]]] = {cls.type: cls for cls in EVENT_TYPES}
"""Each event's class by its `type` tag."""


def _enumerations() -> tuple[type[enum.StrEnum], ...]:
    found: list[type[enum.StrEnum]] = []
    for cls in EVENT_TYPES:
        for hint in typing.get_type_hints(cls).values():
            for arg in (hint, *typing.get_args(hint)):
                if isinstance(arg, type) and issubclass(arg, enum.StrEnum) and arg not in found:
                    found.append(arg)
    return tuple(found)


EVENT_ENUMS: Final = _enumerations()
"""The enumerations the events' fields are typed with (`RunStatus`, `Phase`, `ToolKind`): read
back as their members wherever events are read (the wire's converter, the store)."""


def text_of(event: Event) -> str | None:
    """The text an event carries, what weighs in a reply: what a child printed, its
    activity or message, a tool's summary, a plan's entries, a terminal `status` event's
    final output."""
    match event:
        case _ChildText(text=text):
            return text
        case ToolEvent(summary=summary) | PermissionEvent(summary=summary):
            return summary
        case InputEvent(text=text):
            return text
        case PlanEvent(entries=entries):
            return "".join(entry.content for entry in entries)
        case StatusEvent(output=OutputInfo(text=text)):
            return text
        case _:
            return None


T = TypeVar("T")


class EventField(Generic[T]):
    """A field of an event's own type read through what wraps it (`wire.event_field`):
    that field's value, or None when the event's type has no such field.

    For code written when an event was one object with every field optional
    (`event.text or ""`); matching on the event's class is the typed way.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, wrapper: Any, owner: type | None = None) -> T | None:
        if wrapper is None:
            return None
        return cast("T | None", getattr(wrapper.event, self._name, None))
