"""The one cattrs converter that reads and writes every wire type, and its hooks.

Fields are snake_case in Python and camelCase on the wire, or the wire name a
field declares (`values/wire_names.py`: a workflow's `output_name` is `as`). A field whose value is
`None` is omitted from what we send; a field that must always be sent has no
default. Moments are `datetime`s, written as `timestamp` spells them. Unknown keys
in params are rejected; primitives are checked, not coerced: cattrs on its own
would turn `"false"` into `True` and `3.7` into `3`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, TypeVar, get_args

import attrs
import cattrs
from cattrs.errors import IterableValidationError, IterableValidationNote
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from subagent_host.planning.request import (
    RAW_STREAM,
    ForEachStep,
    ParallelStep,
    SpawnItem,
    StreamChoice,
    WorkflowStep,
)
from subagent_host.planning.views import VIEWS, Unprobed, to_json
from subagent_host.rpc.wire.basics import (
    INLINE,
    MsgToken,
    SessionId,
    WireValueError,
    json_type_name,
    timestamp,
)
from subagent_host.rpc.wire.events import EventWire
from subagent_host.rpc.wire.snapshots import RunList, RunSnapshot, StatusResult
from subagent_host.values import SESSION_ID_PATTERN, SESSION_ID_RULE
from subagent_host.values.events import EVENT_CLASSES
from subagent_host.values.wire_names import wire_name

T = TypeVar("T")


def _structure_session_id(value: Any, _type: type) -> SessionId:
    text = _strict(str, "a string")(value, str)
    if SESSION_ID_PATTERN.fullmatch(text) is None:
        raise WireValueError(f"invalid session id: use {SESSION_ID_RULE}")
    return SessionId(text)


def _strict(kind: type[T], expected: str) -> Callable[[Any, type], T]:
    def structure(value: Any, _type: type) -> T:
        # bool is an int in Python, but never on the wire.
        if type(value) is bool and kind is not bool:
            raise WireValueError(f"expected {expected}, got a boolean")
        if not isinstance(value, kind):
            raise WireValueError(f"expected {expected}, got {json_type_name(value)}")
        return value

    return structure


def _structure_float(value: Any, _type: type) -> float:
    if type(value) is bool or not isinstance(value, int | float):
        raise WireValueError(f"expected a number, got {json_type_name(value)}")
    return float(value)


def _structure_number(value: Any, _type: type) -> int | float:
    """An integer or a number as it came (`LimitReceipt.value`: a count, or dollars)."""
    if type(value) is bool or not isinstance(value, int | float):
        raise WireValueError(f"expected a number, got {json_type_name(value)}")
    return value


def _omitted(attribute: attrs.Attribute[Any]) -> bool:
    """Left out while it is None; an inline group is left out while empty (so that cattrs
    writes it in its place, among the other optional fields, not ahead of them)."""
    return attribute.default is None or bool(attribute.metadata.get(INLINE))


def make_converter(*, forbid_extra_keys: bool = True) -> cattrs.Converter:
    """Build the converter for every wire type (one per server; cheap to build for tests).

    The server reads params with unknown keys refused (the default). The client
    (`subagent_host.client`) reads results with `forbid_extra_keys=False`: a newer
    server may add fields, which an older client then ignores.
    """
    converter = cattrs.Converter(forbid_extra_keys=forbid_extra_keys)
    converter.register_structure_hook(str, _strict(str, "a string"))
    converter.register_structure_hook(int, _strict(int, "an integer"))
    converter.register_structure_hook(bool, _strict(bool, "a boolean"))
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook_func(lambda t: t == int | float, _structure_number)
    converter.register_structure_hook(SessionId, _structure_session_id)
    converter.register_unstructure_hook(datetime, timestamp)
    converter.register_structure_hook(datetime, _structure_moment)
    converter.register_structure_hook_func(
        lambda t: t in (MsgToken, MsgToken | None), _structure_token
    )
    converter.register_structure_hook_func(lambda t: t == StreamChoice, _structure_stream)
    converter.register_structure_hook_func(lambda t: t == tuple[str, ...], _structure_strings)
    converter.register_structure_hook_func(lambda t: t == dict[str, str], _structure_string_map)
    converter.register_structure_hook_func(lambda t: t == dict[str, Any], _structure_object)
    converter.register_structure_hook_func(
        lambda t: t == tuple[SpawnItem, ...], _items_hook(converter)
    )
    converter.register_structure_hook_func(
        lambda t: t == tuple[WorkflowStep, ...], _steps_hook(converter)
    )
    # Results, as a client reads them back (the server only writes these).
    converter.register_structure_hook_func(
        lambda t: t == str | None | Unprobed, _structure_probed_version
    )
    converter.register_structure_hook_func(
        lambda t: t == StatusResult, _status_result_hook(converter)
    )
    # Enumerations (values/choices.py, the events' kinds) are read as their members (a
    # StrEnum would otherwise take `str`'s hook, unchecked) and written as their values.
    converter.register_structure_hook(enum.StrEnum, _structure_member)
    converter.register_unstructure_hook(enum.StrEnum, str)
    # An event: the envelope's keys and its type's fields in one object.
    converter.register_unstructure_hook(EventWire, _event_unstructure_hook(converter))
    converter.register_structure_hook(EventWire, _event_structure_hook(converter))

    def structure_factory(cls: type[Any]) -> Any:
        attrs.resolve_types(cls)
        inline = [a for a in attrs.fields(cls) if a.metadata.get(INLINE)]
        overrides: dict[str, Any] = {
            a.name: override(rename=wire_name(a), omit=a in inline) for a in attrs.fields(cls)
        }
        plain: Callable[[Any, type], Any] = make_dict_structure_fn(
            cls, converter, _cattrs_forbid_extra_keys=forbid_extra_keys, **overrides
        )
        if absent := _nullable_without_default(cls):
            plain = _absent_as_null(plain, absent)
        return _gathering(converter, plain, inline) if inline else plain

    def unstructure_factory(cls: type[Any]) -> Any:
        overrides: dict[str, Any] = {
            a.name: override(rename=wire_name(a), omit_if_default=_omitted(a))
            for a in attrs.fields(cls)
        }
        plain = make_dict_unstructure_fn(cls, converter, **overrides)
        inline = {wire_name(a) for a in attrs.fields(cls) if a.metadata.get(INLINE)}
        return _inlining(plain, inline) if inline else plain

    converter.register_structure_hook_factory(attrs.has, structure_factory)
    converter.register_unstructure_hook_factory(attrs.has, unstructure_factory)
    # The plan, receipts and contract are written as planning writes them: what a
    # client sees is exactly what was fingerprinted (planning/views.py), null members
    # left out as everywhere on the wire.
    converter.register_unstructure_hook_func(lambda t: t in VIEWS, view_json)
    return converter


def _nullable_without_default(cls: type[Any]) -> tuple[str, ...]:
    """Wire names of `cls`'s fields that may be null but have no default (a projection's
    `model`, `label`, ...): stored with their nulls, written to the wire without them."""
    return tuple(
        wire_name(a)
        for a in attrs.fields(cls)
        if a.default is attrs.NOTHING and type(None) in get_args(a.type)
    )


def _absent_as_null(
    plain: Callable[[Any, type], Any], names: tuple[str, ...]
) -> Callable[[Any, type], Any]:
    """Read an absent member of `names` as null: absent fields are omitted, never null."""

    def structure(value: Any, cls: type) -> Any:
        if isinstance(value, dict) and any(name not in value for name in names):
            value = {**dict.fromkeys(names), **value}
        return plain(value, cls)

    return structure


def _gathering(
    converter: cattrs.Converter,
    plain: Callable[[Any, type], Any],
    inline: list[attrs.Attribute[Any]],
) -> Callable[[Any, type], Any]:
    """Read the `inline` fields back from the keys written in their place (see `INLINE`)."""
    groups = [(a.name, _attrs_type(a)) for a in inline]
    keys = {name: {wire_name(f) for f in attrs.fields(kind)} for name, kind in groups}

    def structure(value: Any, cls: type) -> Any:
        if not isinstance(value, dict):
            raise WireValueError(f"expected an object, got {json_type_name(value)}")
        rest = dict(value)
        parts = {
            name: converter.structure(
                {key: rest.pop(key) for key in keys[name] if key in rest}, kind
            )
            for name, kind in groups
        }
        return attrs.evolve(plain(rest, cls), **parts)

    return structure


def _attrs_type(attribute: attrs.Attribute[Any]) -> type[Any]:
    kind = attribute.type
    if not (isinstance(kind, type) and attrs.has(kind)):
        raise TypeError(f"inline field {attribute.name} must be an attrs class")
    return kind


def _structure_stream(value: Any, _type: type) -> bool | str | None:
    """`stream`: a boolean, or `"raw"`."""
    if value is None or type(value) is bool or value == RAW_STREAM:
        return value  # type: ignore[no-any-return]
    raise WireValueError(f'expected a boolean or "{RAW_STREAM}", got {json_type_name(value)}')


def _structure_member(value: Any, kind: type[enum.StrEnum]) -> enum.StrEnum:
    """A member of a string enumeration, by its value."""
    text = _strict(str, "a string")(value, str)
    try:
        return kind(text)
    except ValueError:
        expected = ", ".join(str(member) for member in kind)
        raise WireValueError(f"expected one of {expected}, got {text[:40]!r}") from None


def _structure_moment(value: Any, _type: type) -> datetime:
    """A moment as `timestamp` writes it (any ISO 8601 time with a zone is read)."""
    text = _strict(str, "a string")(value, str)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise WireValueError(f"expected an ISO 8601 time, got {text[:40]!r}") from None
    if moment.tzinfo is None:
        raise WireValueError(f"expected a time with its zone, got {text[:40]!r}")
    return moment


def _structure_probed_version(value: Any, _type: type) -> str | None:
    """A receipt's `version`: a string, or null when the CLI gave none (absent: unprobed)."""
    return None if value is None else _strict(str, "a string")(value, str)


def _event_unstructure_hook(converter: cattrs.Converter) -> Callable[[EventWire], dict[str, Any]]:
    def unstructure(wire: EventWire) -> dict[str, Any]:
        head = {"runId": wire.run_id, "seq": wire.seq, "type": wire.type, "at": timestamp(wire.at)}
        fields: dict[str, Any] = converter.unstructure(wire.event, type(wire.event))
        return {**head, **fields}

    return unstructure


@attrs.frozen
class _EventHead:
    """The keys every `run/event` carries besides its type's fields, read as any wire type."""

    run_id: str
    seq: int
    type: str
    at: datetime


_EVENT_HEAD: Final = ("runId", "seq", "type", "at")


def _event_structure_hook(converter: cattrs.Converter) -> Callable[[Any, type], EventWire]:
    def structure(value: Any, _type: type) -> EventWire:
        if not isinstance(value, dict):
            raise WireValueError(f"expected an object, got {json_type_name(value)}")
        head = converter.structure({k: v for k, v in value.items() if k in _EVENT_HEAD}, _EventHead)
        kind = EVENT_CLASSES.get(head.type)
        if kind is None:
            raise WireValueError(f"expected an event type, got {head.type[:40]!r}")
        fields = {k: v for k, v in value.items() if k not in _EVENT_HEAD}
        event = converter.structure(fields, kind)
        return EventWire(run_id=head.run_id, seq=head.seq, at=head.at, event=event)

    return structure


def _status_result_hook(converter: cattrs.Converter) -> Callable[[Any, type], StatusResult]:
    def structure(value: Any, _type: type) -> StatusResult:
        if isinstance(value, dict) and "runs" in value:
            return converter.structure(value, RunList)
        return converter.structure(value, RunSnapshot)

    return structure


def view_json(view: object) -> dict[str, Any]:
    """A plan, receipts or contract as the wire writes it: `to_json`'s form without null
    members. A stored projection keeps its nulls (it is stored as it always was); digests
    are unchanged, as canonical JSON leaves null members out (planning/fingerprint.py)."""
    written: dict[str, Any] = without_nulls(to_json(view))
    return written


def without_nulls(value: Any) -> Any:
    """`value` with every null member of every object left out (array items are kept)."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def _inlining(
    plain: Callable[[Any], dict[str, Any]], inline: set[str]
) -> Callable[[Any], dict[str, Any]]:
    """Write the `inline` fields' keys in their place, in their order (see `INLINE`)."""

    def unstructure(value: Any) -> dict[str, Any]:
        written: dict[str, Any] = {}
        for key, item in plain(value).items():
            if key in inline:
                written.update(item)
            else:
                written[key] = item
        return written

    return unstructure


def _structure_token(value: Any, _type: type) -> MsgToken | None:
    if value is None or type(value) is int or isinstance(value, str):
        return value
    raise WireValueError(f"expected a string or an integer, got {json_type_name(value)}")


def _structure_strings(value: Any, _type: type) -> tuple[str, ...]:
    # A bare string is not a list of strings (cattrs would split it into letters).
    if not isinstance(value, list):
        raise WireValueError(f"expected an array of strings, got {json_type_name(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise WireValueError(f"item {index}: expected a string, got {json_type_name(item)}")
    return tuple(value)


def _structure_string_map(value: Any, _type: type) -> dict[str, str]:
    if not isinstance(value, dict):
        raise WireValueError(f"expected an object, got {json_type_name(value)}")
    for key, item in value.items():
        if not isinstance(item, str):
            raise WireValueError(f"{key}: expected a string, got {json_type_name(item)}")
    return dict(value)


def _structure_object(value: Any, _type: type) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WireValueError(f"expected an object, got {json_type_name(value)}")
    return dict(value)


def _each_checked(
    converter: cattrs.Converter, value: Any, noun: str, kind_of: Callable[[Any], type[T]]
) -> tuple[T, ...]:
    """An array read member by member as `kind_of` its member says, every bad member
    reported with its index (`item 2`, `step 0`), not only the first."""
    if not isinstance(value, list):
        raise WireValueError(f"expected an array, got {json_type_name(value)}")
    members: list[T] = []
    errors: list[Exception] = []
    for index, raw in enumerate(value):
        kind = kind_of(raw)
        try:
            members.append(converter.structure(raw, kind))
        except Exception as exc:  # noqa: BLE001 - collected and re-raised below
            exc.__notes__ = [IterableValidationNote(f"{noun} {index}", index, kind)]
            errors.append(exc)
    if errors:
        raise IterableValidationError(f"invalid {noun}s", errors, tuple)
    return tuple(members)


def _items_hook(converter: cattrs.Converter) -> Callable[[Any, type], tuple[SpawnItem, ...]]:
    """Items of `tasks`/`chain`: an array of objects, every bad item reported with its index."""

    def structure(value: Any, _type: type) -> tuple[SpawnItem, ...]:
        return _each_checked(converter, value, "item", lambda _raw: SpawnItem)

    return structure


def _step_type(raw: Any) -> type[WorkflowStep]:
    """Which kind of step an object is: by its `parallel` or `forEach` key, else an item."""
    if isinstance(raw, dict):
        if "parallel" in raw:
            return ParallelStep
        if "forEach" in raw:
            return ForEachStep
    return SpawnItem


def _steps_hook(converter: cattrs.Converter) -> Callable[[Any, type], tuple[WorkflowStep, ...]]:
    """A workflow's `chain`: items, `parallel` groups and `forEach` fan-outs, each checked."""

    def structure(value: Any, _type: type) -> tuple[WorkflowStep, ...]:
        return _each_checked(converter, value, "step", _step_type)

    return structure
