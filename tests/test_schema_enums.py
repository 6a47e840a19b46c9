"""Every fixed set of values the schema lists is declared by the type of its field.

There is no table beside the types: a field whose schema has an `enum` (or a
`const`) is typed with a `StrEnum`, a `Literal`, or `Annotated[str, OneOf(...)]`
(values/choices.py), and a field typed so always has one. A field added as a plain
`str` whose values are fixed fails here until its type says them.
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Annotated, Any, Final, Literal

import attrs
import pytest

from subagent_host.openrpc.schemas import Direction, Schema, SchemaBuilder
from subagent_host.rpc.wire import INLINE, EventWire
from subagent_host.values.choices import (
    AGENT_BACKENDS,
    BACKENDS,
    AgentBackendName,
    BackendName,
    OneOf,
    is_backend_name,
)
from subagent_host.values.events import EVENT_TYPES
from subagent_host.values.facts import BackendInfo
from subagent_host.values.wire_names import wire_name
from tests.e2e.harness import schema_document
from tests.test_schema_samples import WIRE_TYPES

# Every attrs class the document describes (an event's own fields inside `EventWire`'s).
CLASSES: Final = sorted(
    {*WIRE_TYPES.values(), *EVENT_TYPES} - {EventWire}, key=lambda cls: cls.__name__
)


def fields_with_hints(cls: type[Any]) -> list[tuple[attrs.Attribute[Any], Any]]:
    """Each field written under its own key (an inline field's own fields in its place),
    with its annotation, extras kept."""
    hints = typing.get_type_hints(cls, include_extras=True)
    found = []
    for field in attrs.fields(cls):
        if field.metadata.get(INLINE):
            found += fields_with_hints(hints[field.name])
        else:
            found.append((field, hints[field.name]))
    return found


def without_none(hint: Any) -> Any:
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        kept = [arg for arg in typing.get_args(hint) if arg is not types.NoneType]
        return kept[0] if len(kept) == 1 else typing.Union[tuple(kept)]  # noqa: UP007
    return hint


def names_its_values(hint: Any) -> bool:
    """Whether an annotation (None and a tuple's items aside) is a fixed set of values."""
    hint = without_none(hint)
    if typing.get_origin(hint) is tuple:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) is Literal:
        return True
    if typing.get_origin(hint) is Annotated:
        return any(isinstance(extra, OneOf) for extra in typing.get_args(hint)[1:])
    return isinstance(hint, type) and issubclass(hint, enum.Enum)


def lists_values(schema: Schema) -> bool:
    target = schema.get("items", schema)
    return "enum" in target or "const" in target


@pytest.mark.parametrize("cls", CLASSES, ids=[cls.__name__ for cls in CLASSES])
def test_a_field_whose_schema_lists_values_is_typed_with_them(cls: type[Any]) -> None:
    properties = SchemaBuilder().properties(cls, Direction.RESULT)
    mismatched = []
    for field, hint in fields_with_hints(cls):
        if getattr(field.validator, "options", None):
            continue  # lsprotocol's `kind`: its values come with its validator
        schema, _ = properties[wire_name(field)]
        if lists_values(schema) != names_its_values(hint):
            mismatched.append((field.name, hint, schema))
    assert mismatched == []


def test_each_enum_of_the_committed_document_is_a_field_typed_with_its_values() -> None:
    """Read from the other side: every property of the committed document that lists
    values (LSP's progress `kind`s and a `run/event`'s `type` aside) is one of those fields."""
    typed = {
        (cls.__name__, wire_name(field))
        for cls in CLASSES
        for field, hint in fields_with_hints(cls)
        if names_its_values(hint)
    }
    listed = {
        (name, key)
        for name, schema in schema_document()["components"]["schemas"].items()
        for key, prop in schema.get("properties", {}).items()
        if lists_values(prop) and not name.startswith("WorkDoneProgress")
    }
    # An event's fields are properties of `EventWire`, whose `type` is the event's class.
    events = {cls.__name__ for cls in EVENT_TYPES}
    expected = {(name, key) for name, key in typed if name not in events}
    expected |= {("EventWire", key) for name, key in typed if name in events}
    assert listed == expected | {("EventWire", "type")}
    assert ("StepSnapshot", "status") in listed and ("PingResult", "persistence") in listed


def test_a_backend_is_an_open_string_whose_values_are_listed_in_one_place() -> None:
    """`backend` may name a backend the configuration adds (an ACP agent): never a closed
    enum, but a pattern, with the built-in backends as its examples."""
    backends = [
        (cls, field.name, hint)
        for cls in CLASSES
        for field, hint in fields_with_hints(cls)
        if field.name == "backend" or (cls is BackendInfo and field.name == "id")
    ]
    assert {cls.__name__ for cls, _, _ in backends} >= {
        "ChildSnapshot",
        "PlanChild",
        "ChildReceipt",
        "Egress",
        "Projection",
        "SpawnParams",
        "BackendInfo",
    }
    for cls, name, hint in backends:
        assert without_none(hint) in (BackendName, AgentBackendName), (cls.__name__, name)
    assert typing.get_args(BackendName)[1].examples == BACKENDS
    assert typing.get_args(AgentBackendName)[1].examples == AGENT_BACKENDS
    assert all(is_backend_name(name) for name in BACKENDS)
    assert set(AGENT_BACKENDS) < set(BACKENDS)
