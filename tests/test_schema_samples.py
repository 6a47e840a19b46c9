"""Every wire type, written by the real converters, is what its schema says.

For each component of the document a value is made with every field set, and
one with only the fields that have no default; each is written as the server
writes it and checked against its schema with every object closed (params
types are also read back, as the server reads params). So a key the
converters write differently from the schema (a rename, an inline field, a
field left out or sent) fails here, for types added later too.
"""

from __future__ import annotations

import enum
import types
import typing
from datetime import UTC, datetime
from typing import Any, Final

import attrs
import pytest
from jsonschema.validators import Draft202012Validator

from subagent_host.handlers.table import METHODS
from subagent_host.openrpc import document
from subagent_host.openrpc.builder import PROTOCOL_NOTIFICATIONS, SERVER_NOTIFICATIONS
from subagent_host.openrpc.check import close_objects
from subagent_host.openrpc.schemas import REF_PREFIX
from subagent_host.planning.views import VIEWS, from_json, to_json
from subagent_host.rpc.wire import INLINE, EventWire, SessionId, make_converter
from subagent_host.values.choices import OneOf
from subagent_host.values.events import EVENT_TYPES, Event
from subagent_host.values.wire_names import wire_name

MOMENT: Final = datetime(2026, 11, 30, 2, 47, 37, 415000, tzinfo=UTC)
CONVERTER: Final = make_converter()


def wire_types() -> dict[str, type[Any]]:
    """Each attrs class reachable from the method table and the notifications, by name."""
    roots: list[Any] = [spec.params for spec in METHODS.values()]
    roots += [*SERVER_NOTIFICATIONS.values(), *PROTOCOL_NOTIFICATIONS.values()]
    roots += [spec.result for spec in METHODS.values() if spec.result is not None]
    found: dict[str, type[Any]] = {}
    pending = list(roots)
    while pending:
        hint = pending.pop()
        if not (attrs.has(hint) and isinstance(hint, type)):
            pending += typing.get_args(hint)
        elif hint in EVENT_TYPES:  # written inside an `EventWire`, not a component of its own
            pending += fields_of(hint)
        elif hint.__name__ not in found:
            found[hint.__name__] = hint
            pending += fields_of(hint)
    return found


def fields_of(cls: type[Any]) -> list[Any]:
    """The types of `cls`'s fields, an inline field's own fields in its place."""
    hints = typing.get_type_hints(cls)
    found = []
    for field in attrs.fields(cls):
        if field.metadata.get(INLINE):
            found += fields_of(hints[field.name])
        else:
            found.append(hints[field.name])
    return found


WIRE_TYPES: Final = wire_types()


def sample(hint: Any, *, full: bool) -> Any:
    """A value of `hint`: an enumeration's first value where it has one."""
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        kept = [arg for arg in typing.get_args(hint) if arg is not types.NoneType]
        return sample(kept[0], full=full)
    if typing.get_origin(hint) is typing.Annotated:
        base, *extras = typing.get_args(hint)
        choices = [extra.values for extra in extras if isinstance(extra, OneOf)]
        return choices[0][0] if choices else sample(base, full=full)
    if typing.get_origin(hint) is typing.Literal:
        return typing.get_args(hint)[0]
    if hint is SessionId:
        return SessionId("s1")
    simple = {str: "text", int: 1, float: 1.5, bool: True, datetime: MOMENT}
    if hint in simple:
        return simple[hint]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(iter(hint))
    if hint is Any:
        return "any"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        return (sample(args[0], full=full),)
    if origin is dict:
        return {"key": sample(args[1], full=full)}
    if attrs.has(hint):
        return instance(hint, full=full)
    raise AssertionError(f"no sample of {hint!r}")


def instance(cls: type[Any], *, full: bool) -> Any:
    hints = typing.get_type_hints(cls, include_extras=True)
    values = {}
    for field in attrs.fields(cls):
        if not full and field.default is not attrs.NOTHING and field.name != "status":
            continue
        if getattr(field.validator, "options", None):
            continue  # lsprotocol's `kind`: its one allowed value is its default
        values[field.alias] = sample(hints[field.name], full=full)
    return cls(**values)


def written(value: Any) -> Any:
    return to_json(value) if type(value) in VIEWS else CONVERTER.unstructure(value)


def validator(name: str) -> Draft202012Validator:
    components = close_objects(document()["components"])
    return Draft202012Validator({"$ref": REF_PREFIX + name, "components": components})


@pytest.mark.parametrize("full", [True, False], ids=["every-field", "required-only"])
@pytest.mark.parametrize("name", sorted(WIRE_TYPES))
def test_each_wire_type_as_written_matches_its_schema(name: str, full: bool) -> None:
    cls = WIRE_TYPES[name]
    schema = document()["components"]["schemas"][name]
    value = written(instance(cls, full=full))
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator(name).iter_errors(value)]
    assert errors == [], f"{name} as written: {value}"
    if schema.get("additionalProperties") is False and not cls.__module__.startswith("lsprotocol"):
        # A params type: what the schema allows is what the server reads.
        reread = from_json(value, cls) if cls in VIEWS else CONVERTER.structure(value, cls)
        assert reread == instance(cls, full=full)


@pytest.mark.parametrize("full", [True, False], ids=["every-field", "required-only"])
@pytest.mark.parametrize("kind", EVENT_TYPES, ids=lambda kind: kind.type)
def test_each_event_type_as_written_matches_the_schema_and_reads_back(
    kind: type[Event], full: bool
) -> None:
    """The `run/event` written from each class of the union is what the schema allows, and the
    client reads it back into the same class (`EventWire` with `event`)."""
    event = EventWire(run_id="r1", seq=7, at=MOMENT, event=instance(kind, full=full))
    value = written(event)
    assert list(value)[:4] == ["runId", "seq", "type", "at"] and value["type"] == kind.type
    errors = [
        f"{list(e.absolute_path)}: {e.message}" for e in validator("EventWire").iter_errors(value)
    ]
    assert errors == [], value
    read = make_converter(forbid_extra_keys=False).structure(value, EventWire)
    assert read == event
    kinds = [type(getattr(read.event, field.name)) for field in attrs.fields(kind)]
    assert kinds == [type(getattr(event.event, field.name)) for field in attrs.fields(kind)]


@pytest.mark.parametrize("kind", EVENT_TYPES, ids=lambda kind: kind.type)
def test_each_event_type_has_its_branch_of_the_schemas_one_of_with_exactly_its_fields(
    kind: type[Event],
) -> None:
    """A branch per class, titled with its tag: its required fields those without a default,
    and every other event field but its own optional ones declared absent."""
    schema = document()["components"]["schemas"]["EventWire"]
    [branch] = [branch for branch in schema["oneOf"] if branch["title"] == kind.type]
    own = {wire_name(field): field for field in attrs.fields(kind)}
    required = [name for name, field in own.items() if field.default is attrs.NOTHING]
    assert branch["required"] == required
    assert branch["properties"]["type"] == {"const": kind.type}
    absent = {name for name, value in branch["properties"].items() if value == {"not": {}}}
    head = {"runId", "seq", "type", "at"}
    assert absent == set(schema["properties"]) - head - set(own)
    assert set(own) <= set(schema["properties"])


def test_every_component_but_the_error_shape_is_a_wire_type() -> None:
    assert set(document()["components"]["schemas"]) - set(WIRE_TYPES) == {"ErrorObject"}
