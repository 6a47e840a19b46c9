"""A run's event as the wire carries it: `run/event`'s params (the converter's event hooks
read and write it: `converter.py`)."""

from __future__ import annotations

from datetime import datetime

import attrs

from subagent_host.values import RunStatus
from subagent_host.values.events import Event, EventField, Phase, ToolKind
from subagent_host.values.facts import OutputInfo, Usage


@attrs.frozen
class EventWire:
    """One event of a run: the params of a `run/event` notification, and an item of the
    `events` that `status {since}` replays."""

    # Written as one object: `runId`, `seq`, `type` and `at`, then the fields of `event` (its
    # class is its `type`: `values/events.py`); read back into the same classes. The schema's
    # `oneOf` is generated from those classes (openrpc/schemas.py).

    run_id: str
    """The run the event belongs to."""
    seq: int
    """From 1 for each run, one more per event, without gaps."""
    at: datetime
    """When it happened."""
    event: Event
    """What happened: its `type` and the fields of that type."""

    @property
    def type(self) -> str:
        """`status`, `child`, `output`, `stderr`, `activity`, an agent child's `message`, `tool`,
        `usage` or `plan`, or an interactive child's `turn`, `input` or `permission`."""
        return self.event.type

    # Each field of the event's own type, None where its type has none (`event.text`): as
    # when an event was one object with every field optional. `match event.event` is typed.
    status = EventField[RunStatus]()
    index = EventField[int]()
    text = EventField[str]()
    final = EventField[bool]()
    phase = EventField[Phase]()
    tool_id = EventField[str]()
    name = EventField[str]()
    kind = EventField[ToolKind]()
    summary = EventField[str]()
    is_error = EventField[bool]()
    usage = EventField[Usage]()
    output = EventField[OutputInfo]()
