"""JSON Schema 2020-12 for attrs types, written as the wire's converters write them.

The rules are the converters' own (`rpc/wire/`, `planning/views.py`): keys are
camelCase, or the wire name a field declares (`output_name` is `as`); an
`INLINE` field's keys stand in its parent; a field that may be None is left out
while unset (absent fields are omitted, never null), so it is not `required`;
any other field is always sent. Params are read with unknown keys refused, so
their objects say `additionalProperties: false`;
results leave `additionalProperties` open, so that a client checking a reply
against an older schema keeps working when a later version adds a field. Every
attrs class becomes one entry of `components.schemas`, named as the class,
referenced by `$ref`.

Every schema is portable (`openrpc/portable.py` checks it): no boolean subschema
(a key that must be absent is `{"not": {}}`), no `type` array (a union of
primitives is `anyOf` its types), and each name a `oneOf` branch requires is
declared in that branch's own `properties`. Tools that read JSON Schema
through a narrower dialect (OpenAPI-style function declarations, MCP clients'
portability checks, Ajv's strict mode) then take them as they are.
"""

from __future__ import annotations

import collections.abc
import enum
import types
import typing
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Annotated, Any, Final, Literal

import attrs

from subagent_host.openrpc.docstrings import class_description, field_description, unwrap
from subagent_host.planning.views import UNPROBED
from subagent_host.rpc.wire import INLINE, EventWire, SessionId
from subagent_host.values import SESSION_ID_PATTERN
from subagent_host.values.choices import Matching, OneOf
from subagent_host.values.events import EVENT_TYPES
from subagent_host.values.wire_names import wire_name

Schema = dict[str, Any]
REF_PREFIX: Final = "#/components/schemas/"
SEQUENCES: Final = (list, collections.abc.Sequence)
MAPPINGS: Final = (dict, collections.abc.Mapping)
PRIMITIVES: Final[dict[type[Any], str]] = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
}


class Direction(enum.Enum):
    """Which way a type travels: params are read strictly, results written."""

    PARAMS = "params"
    RESULT = "result"


class SchemaError(TypeError):
    """A type the generator cannot describe; the message names it."""


class SchemaBuilder:
    """Collects `components.schemas` while building the schemas that refer to them."""

    def __init__(self) -> None:
        self.components: dict[str, Schema] = {}
        self._directions: dict[type[Any], Direction] = {}
        self._names: dict[str, type[Any]] = {}

    def ref(self, cls: type[Any], direction: Direction) -> Schema:
        """A `$ref` to `cls`'s component schema, built on first use."""
        name = cls.__name__
        known = self._names.setdefault(name, cls)
        if known is not cls:
            raise SchemaError(f"two wire types are named {name}: {known} and {cls}")
        seen = self._directions.setdefault(cls, direction)
        if seen is not direction:
            raise SchemaError(f"{name} is used both in params and in results")
        if name not in self.components:
            self.components[name] = {}  # reserved: a type may refer to itself
            self.components[name] = self.object_schema(cls, direction)
        return {"$ref": REF_PREFIX + name}

    def object_schema(self, cls: type[Any], direction: Direction) -> Schema:
        """The schema of an attrs class's JSON object."""
        properties: dict[str, Schema] = {}
        required: list[str] = []
        for name, (property_schema, is_required) in self.properties(cls, direction).items():
            properties[name] = property_schema
            if is_required:
                required.append(name)
        schema: Schema = {"type": "object"}
        description = class_description(cls)
        if description:
            schema["description"] = description
        schema["properties"] = properties
        if required:
            schema["required"] = required
        if direction is Direction.PARAMS:
            schema["additionalProperties"] = False
        if cls is EventWire:
            schema["oneOf"] = self._event_variants(properties, direction)
        return schema

    def properties(self, cls: type[Any], direction: Direction) -> dict[str, tuple[Schema, bool]]:
        """Each wire key of `cls` in the order it is written: its schema, and whether it is
        required."""
        if cls is EventWire:
            return self._event_properties(direction)
        return self._attrs_properties(cls, direction)

    def _attrs_properties(
        self, cls: type[Any], direction: Direction
    ) -> dict[str, tuple[Schema, bool]]:
        hints = typing.get_type_hints(cls, include_extras=True)  # `OneOf` is an extra
        found: dict[str, tuple[Schema, bool]] = {}
        for field in attrs.fields(cls):
            if field.metadata.get(INLINE):
                found.update(self.properties(hints[field.name], direction))
                continue
            found[wire_name(field)] = self._field(cls, field, hints[field.name], direction)
        return found

    def _field(
        self, cls: type[Any], field: attrs.Attribute[Any], hint: Any, direction: Direction
    ) -> tuple[Schema, bool]:
        args = _union_args(hint)
        # Absent fields are omitted, never null (protocol.md §12): a field that may be None
        # is never required, and null is never written.
        if direction is Direction.PARAMS:
            required = field.default is attrs.NOTHING
        else:
            required = (
                field.default is not None
                and field.default is not UNPROBED
                and types.NoneType not in args
            )
        kept = [arg for arg in args if arg is not types.NoneType and not _is_marker(arg, field)]
        schema = self.type_schema(kept[0] if len(kept) == 1 else _as_union(kept), direction)
        values = _validator_options(field)
        if values is not None:
            schema.update({"const": values[0]} if len(values) == 1 else {"enum": list(values)})
        description = field_description(cls, field.name)
        if description:  # beside a `$ref` too: 2020-12 reads both
            schema = {**schema, "description": description}
        return schema, required

    def _event_properties(self, direction: Direction) -> dict[str, tuple[Schema, bool]]:
        """A `run/event`'s keys: `runId`, `seq`, `type`, `at` always, then each field any
        event type carries (optional here: the `oneOf` branch of its type says which)."""
        hints = typing.get_type_hints(EventWire)
        envelope = {
            wire_name(field): self._field(EventWire, field, hints[field.name], direction)
            for field in attrs.fields(EventWire)
            if field.name != "event"  # written as `type` and the fields below
        }
        tags = [cls.type for cls in EVENT_TYPES]
        described = unwrap(EventWire.type.__doc__ or "")
        kind: Schema = {"type": "string", "enum": tags, "description": described}
        found = {name: envelope[name] for name in ("runId", "seq")}
        found.update({"type": (kind, True), "at": envelope["at"]})
        for cls in EVENT_TYPES:
            for name, (schema, _) in self._attrs_properties(cls, direction).items():
                found.setdefault(name, (schema, False))
        return found

    def _event_variants(self, properties: dict[str, Schema], direction: Direction) -> list[Schema]:
        """A `run/event` by its `type`: the fields each type carries, and no others.

        Each branch declares the fields it requires (their schemas as the type's own, without
        the description), so that the branch reads on its own; the optional fields it never
        carries are `{"not": {}}`.
        """
        variants = []
        for cls in EVENT_TYPES:
            own = self._attrs_properties(cls, direction)
            keys = [name for name, (_, required) in own.items() if required]
            declared = {name: _undescribed(own[name][0]) for name in keys}
            absent = {
                name: never()
                for name in properties
                if name not in own and name not in ("runId", "seq", "type", "at")
            }
            variants.append(
                {
                    "title": cls.type,
                    "properties": {"type": {"const": cls.type}, **declared, **absent},
                    "required": keys,
                }
            )
        return variants

    def type_schema(self, hint: Any, direction: Direction) -> Schema:
        """The schema of one annotation (no None in it)."""
        if hint is SessionId:
            return {"type": "string", "pattern": f"^(?:{SESSION_ID_PATTERN.pattern})$"}
        if hint is Any:
            return {}
        if hint in PRIMITIVES:
            return {"type": PRIMITIVES[hint]}
        if hint is datetime:
            return {"type": "string", "format": "date-time"}
        if attrs.has(hint):
            return self.ref(hint, direction)
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _enum_schema([member.value for member in hint])
        if typing.get_origin(hint) is Annotated:
            return self._annotated(hint, direction)
        if hasattr(hint, "__supertype__"):  # a NewType: written as what it wraps
            return self.type_schema(hint.__supertype__, direction)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is Literal:
            return _enum_schema(list(args))
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis or origin in SEQUENCES:
            return {"type": "array", "items": self.type_schema(args[0], direction)}
        if origin in MAPPINGS and args and args[0] is str:
            values = self.type_schema(args[1], direction)
            return (
                {"type": "object", "additionalProperties": values} if values else {"type": "object"}
            )
        if origin in (types.UnionType, typing.Union):
            return self._union(args, direction)
        raise SchemaError(f"no JSON Schema for {hint!r}")

    def _annotated(self, hint: Any, direction: Direction) -> Schema:
        """`Annotated[str, OneOf(...)]`: a string the code keeps open, whose values the
        schema lists all the same; `Annotated[str, Matching(...)]`: one whose values match
        a pattern (values/choices.py); any other extra says nothing here."""
        base, *extras = typing.get_args(hint)
        patterns = [extra for extra in extras if isinstance(extra, Matching)]
        if patterns and base is str:
            pattern, examples = patterns[0].pattern.pattern, list(patterns[0].examples)
            return {"type": "string", "pattern": f"^(?:{pattern})$", "examples": examples}
        choices = [extra for extra in extras if isinstance(extra, OneOf)]
        if not choices:
            return self.type_schema(base, direction)
        if base is not str:
            raise SchemaError(f"OneOf annotates a str, not {base!r}")
        return _enum_schema(list(choices[0].values))

    def _union(self, args: tuple[Any, ...], direction: Direction) -> Schema:
        if all(arg in PRIMITIVES for arg in args):
            # `anyOf`, not a `type` array (not portable), nor `oneOf` (`int | float`: an
            # integer is a number too).
            return {"anyOf": [{"type": PRIMITIVES[arg]} for arg in args]}
        return {"oneOf": [self.type_schema(arg, direction) for arg in args]}


def _enum_schema(values: list[Any]) -> Schema:
    kinds = {PRIMITIVES.get(type(value)) for value in values}
    schema: Schema = {"type": kinds.pop()} if len(kinds) == 1 and None not in kinds else {}
    schema.update({"const": values[0]} if len(values) == 1 else {"enum": values})
    return schema


def _union_args(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return typing.get_args(hint)
    return (hint,)


def _as_union(args: list[Any]) -> Any:
    union: Any = typing.Union[tuple(args)]  # noqa: UP007 - built from a runtime list
    return union


def _is_marker(arg: Any, field: attrs.Attribute[Any]) -> bool:
    """The type of a default standing for "left out" (`UNPROBED`): never written."""
    return field.default is UNPROBED and arg is type(UNPROBED)


def _validator_options(field: attrs.Attribute[Any]) -> tuple[str, ...] | None:
    """The values an `attrs.validators.in_` allows (lsprotocol's `kind`), when it has one."""
    options = getattr(field.validator, "options", None)
    if isinstance(options, list | tuple | frozenset | set) and all(
        isinstance(option, str) for option in options
    ):
        return tuple(sorted(options))
    return None


def never() -> Schema:
    """The schema no value matches, as an object: a bare `false` is not portable."""
    return {"not": {}}


def _undescribed(schema: Schema) -> Schema:
    return {key: value for key, value in schema.items() if key != "description"}


HEAD: Final = ("runId", "seq", "type", "at")
"""The keys every `run/event` carries besides its type's fields."""

DEFS_PREFIX: Final = "#/$defs/"


def standalone_schema(
    roots: Sequence[type[Any]], direction: Direction, *, leave_out: Collection[str] = ()
) -> Schema:
    """The JSON Schema of attrs types on their own, as a document of one schema (an MCP
    tool's `inputSchema` or `outputSchema`): the object of the one root, or `oneOf` the
    roots' objects; the types they refer to under `$defs`, as `#/$defs/NAME`.

    `leave_out` names wire keys taken out of the roots' properties (fields a face does
    not offer); the `$defs` only they needed go with them.
    """
    builder = SchemaBuilder()
    bodies = [builder.object_schema(cls, direction) for cls in roots]
    for body in bodies:
        for key in leave_out:
            body["properties"].pop(key, None)
        if "required" in body:
            body["required"] = [key for key in body["required"] if key not in leave_out]
    schema: Schema = bodies[0] if len(bodies) == 1 else {"type": "object", "oneOf": bodies}
    used = _referenced(schema, builder.components)
    if used:
        schema["$defs"] = {name: builder.components[name] for name in sorted(used)}
    rewritten: Schema = _rewrite_refs(schema)
    return rewritten


def _referenced(schema: Any, components: dict[str, Schema]) -> set[str]:
    """The component names `schema` refers to, and those they refer to in turn."""
    found: set[str] = set()
    pending = [schema]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str) and ref.startswith(REF_PREFIX):
                name = ref.removeprefix(REF_PREFIX)
                if name not in found:
                    found.add(name)
                    pending.append(components[name])
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return found


def _rewrite_refs(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: (
                DEFS_PREFIX + item.removeprefix(REF_PREFIX)
                if key == "$ref" and isinstance(item, str)
                else _rewrite_refs(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_rewrite_refs(item) for item in value]
    return value
