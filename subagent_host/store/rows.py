"""Runs as the rows one write carries: serialised on the loop, written on the store's thread.

A run is a `runs` row (its own fields as JSON, plus the columns queries need),
one `attempts` row per attempt of each child (the newest is the child as a
snapshot shows it), and its newest events.
"""

from __future__ import annotations

import enum
import functools
import typing
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

import attrs

from subagent_host.runs.state import ChildRun, Run, RunEvent
from subagent_host.store.records import child_record, dumps, run_record
from subagent_host.values.facts import OutputInfo, Usage
from subagent_host.values.json_values import JsonObject

if TYPE_CHECKING:
    # The event classes load with the first event written or read: what reads runs
    # alone (`subagent-host runs`, `show`) never loads them (tests/terminal).
    from subagent_host.values.events import Event


@attrs.frozen
class ChildRow:
    """One child attempt as it is written: its record and the columns recovery reads."""

    index: int
    attempt: int
    status: str
    pid: int | None
    pgid: int | None
    create_time: float | None
    record: str
    start_time_probe: Callable[[], float | None] | None = None
    """Reads the process's start time (off the loop) when it is not known yet."""
    child: ChildRun | None = None


@attrs.frozen
class RunRow:
    """One run as it is written, with the events appended since the last write."""

    run_id: str
    session_id: str
    kind: str
    status: str
    created_at: str
    ended_at: str | None
    label: str | None
    last_seq: int
    record: str
    children: tuple[ChildRow, ...]
    events: tuple[tuple[int, str], ...]
    first_retained_seq: int = 1
    """Older events are deleted: the run's events stay bounded on disk as in memory."""


@attrs.frozen
class StoredEvent:
    """An event as a write carries it: encoded once, possibly turns before its run's write."""

    seq: int
    record: str


def stored_event(event: RunEvent) -> StoredEvent:
    return StoredEvent(event.seq, dumps(event_record(event)))


def run_row(run: Run, events: Iterable[RunEvent | StoredEvent]) -> RunRow:
    """Serialise a run as it is now (on the loop: the objects keep changing).

    `events` may be encoded already (`stored_event`): an event never changes once emitted.
    """
    return RunRow(
        run_id=run.run_id,
        session_id=run.session_id,
        kind=str(run.kind),
        status=str(run.status),
        created_at=run.created_at.isoformat(),
        ended_at=run.ended_at.isoformat() if run.ended_at else None,
        label=run.label,
        last_seq=run.last_seq,
        record=dumps(run_record(run)),
        children=tuple(_child_row(child) for child in run.children),
        events=tuple(
            (stored.seq, stored.record)
            for stored in (
                event if isinstance(event, StoredEvent) else stored_event(event)
                for event in events
                if event.seq >= run.first_retained_seq  # dropped within this turn already
            )
        ),
        first_retained_seq=run.first_retained_seq,
    )


def _child_row(child: ChildRun) -> ChildRow:
    probe = child.start_time_probe if child.create_time is None and child.pid else None
    return ChildRow(
        index=child.index,
        attempt=child.attempt,
        status=str(child.status),
        pid=child.pid,
        pgid=child.pgid,
        create_time=child.create_time,
        record=dumps(child_record(child)),
        start_time_probe=probe,
        child=child if probe else None,
    )


def create_time(row: ChildRow) -> float | None:
    """The row's process start time, read now if it was not known (store thread)."""
    if row.create_time is not None or row.start_time_probe is None:
        return row.create_time
    created = row.start_time_probe()
    if created is not None and row.child is not None:
        row.child.create_time = created  # remembered: read once per child, not per write
    return created


def event_record(event: RunEvent) -> dict[str, object]:
    """An event as the store has always kept it: its `type`, `at`, and its `fields` by their
    snake_case names, absent ones left out (a `status` event's output whole, nulls too; a usage
    without its nulls): records of earlier versions and of this one read alike."""
    return {"type": event.type, "at": event.at.isoformat(), "fields": _stored_fields(event.payload)}


def event_from_record(seq: int, record: JsonObject) -> RunEvent:
    kind, at, stored = record["type"], record["at"], record["fields"]
    if not isinstance(kind, str) or not isinstance(at, str) or not isinstance(stored, dict):
        raise ValueError(f"event {seq} is not an event as the store keeps one")
    fields: dict[str, object] = dict(stored)
    from subagent_host.values.events import EVENT_CLASSES  # see TYPE_CHECKING above

    # Its fields by name, as `event_record` wrote them from the same class.
    make: Callable[..., Event] = EVENT_CLASSES[kind]
    read = _readers()[EVENT_CLASSES[kind]]
    for name in fields.keys() & read.keys():
        fields[name] = read[name](fields[name])
    return RunEvent(seq=seq, at=datetime.fromisoformat(at), payload=make(**fields))


@functools.cache
def _field_names() -> Mapping[type[Event], tuple[str, ...]]:
    from subagent_host.values.events import EVENT_TYPES  # see TYPE_CHECKING above

    return {kind: tuple(field.name for field in attrs.fields(kind)) for kind in EVENT_TYPES}


def _stored_fields(payload: Event) -> dict[str, object]:
    # Per event (a streaming run writes thousands): field names looked up once per class;
    # statuses, phases and kinds are str enumerations, written as their values by JSON itself.
    fields: dict[str, object] = {}
    for name in _field_names()[type(payload)]:
        value = getattr(payload, name)
        if value is None:
            continue
        if isinstance(value, OutputInfo):
            value = attrs.asdict(value)  # nulls too, as it always was
        elif isinstance(value, Usage):
            value = {key: part for key, part in attrs.asdict(value).items() if part is not None}
        elif isinstance(value, tuple):  # a permission's options
            value = [attrs.asdict(part) if attrs.has(type(part)) else part for part in value]
        fields[name] = value
    return fields


@functools.cache
def _readers() -> Mapping[type[Event], Mapping[str, Callable[..., object]]]:
    """Stored fields that are not plain JSON values, by event class and name: what reads
    each back (an enumeration's member, an attrs value from its snake_case fields, a
    tuple of them)."""
    from subagent_host.values.events import EVENT_TYPES  # see TYPE_CHECKING above

    return {kind: _field_readers(kind) for kind in EVENT_TYPES}


def _reader(hint: object) -> Callable[..., object] | None:
    for arg in (hint, *typing.get_args(hint)):
        if isinstance(arg, type) and issubclass(arg, enum.Enum):
            return arg
        if isinstance(arg, type) and attrs.has(arg):
            return functools.partial(_from_fields, arg)
        if typing.get_origin(arg) is tuple and (read := _reader(typing.get_args(arg)[0])):
            return functools.partial(_each, read)
    return None


def _from_fields(kind: type, fields: dict[str, object]) -> object:
    read = _field_readers(kind)
    return kind(
        **{name: read[name](value) if name in read else value for name, value in fields.items()}
    )


def _field_readers(kind: type) -> Mapping[str, Callable[..., object]]:
    """What reads back each field of an attrs class that is not a plain JSON value (once
    per class: a streaming run's events are read by the thousand)."""
    found = _FIELD_READERS.get(kind)
    if found is None:
        found = _FIELD_READERS[kind] = {
            name: reader
            for name, hint in typing.get_type_hints(kind).items()
            if (reader := _reader(hint)) is not None
        }
    return found


_FIELD_READERS: dict[type, Mapping[str, Callable[..., object]]] = {}


def _each(read: Callable[..., object], values: list[object]) -> tuple[object, ...]:
    return tuple(read(value) for value in values)
