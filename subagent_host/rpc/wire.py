"""Every type that crosses the wire, and the one cattrs converter that reads and writes them.

Fields are snake_case in Python and camelCase on the wire. A field whose value is
`None` is omitted from what we send; a field that must always be sent has no
default. Unknown keys in params are rejected, and primitives are checked, not
coerced: cattrs on its own would turn `"false"` into `True` and `3.7` into `3`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, NewType, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

T = TypeVar("T")

# Session ids are chosen by clients, stored, and shown in logs: keep them plain.
SESSION_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
SESSION_ID_RULE: Final = "1-128 characters of A-Z a-z 0-9 . _ : -, starting with a letter or digit"


class WireValueError(ValueError):
    """A value has the wrong type or form; its message is shown to the client as is."""


def camel_case(name: str) -> str:
    """`enforced_timeout_ms` -> `enforcedTimeoutMs`."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


# Formats are checked by structure hooks of these types, not by attrs validators:
# cattrs reports hook failures for every field at once, validators only after.
SessionId = NewType("SessionId", str)


def _structure_session_id(value: Any, _type: type) -> SessionId:
    text = _strict(str, "a string")(value, str)
    if SESSION_ID_PATTERN.fullmatch(text) is None:
        raise WireValueError(f"invalid session id: use {SESSION_ID_RULE}")
    return SessionId(text)


# --- ping (CONTRACT §2) ---------------------------------------------------------------


@attrs.frozen
class PingParams:
    session_id: SessionId | None = None
    """Bind this connection to an existing session; without it the connection keeps its own."""


@attrs.frozen
class ServerInfo:
    name: str
    version: str


@attrs.frozen
class BackendInfo:
    id: str
    available: bool
    version: str | None = None
    reason: str | None = None
    """Why the backend is unavailable, when it is."""


@attrs.frozen
class Limits:
    max_concurrency: int
    max_parallel: int
    grace_ms: int
    default_timeout_ms: int
    default_stall_timeout_ms: int
    output_cap_bytes: int
    output_cap_lines: int
    previous_cap_bytes: int
    max_message_bytes: int


@attrs.frozen
class PingResult:
    pong: bool
    server: ServerInfo
    protocol_version: str
    session_id: str
    methods: tuple[str, ...]
    backends: tuple[BackendInfo, ...]
    limits: Limits


# --- the converter ---------------------------------------------------------------------


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


def json_type_name(value: Any) -> str:
    """How a client would name the JSON type of `value`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _none_default(attribute: attrs.Attribute[Any]) -> bool:
    return attribute.default is None


def make_converter() -> cattrs.Converter:
    """Build the converter for every wire type (one per server; cheap to build for tests)."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(str, _strict(str, "a string"))
    converter.register_structure_hook(int, _strict(int, "an integer"))
    converter.register_structure_hook(bool, _strict(bool, "a boolean"))
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook(SessionId, _structure_session_id)

    def structure_factory(cls: type[Any]) -> Any:
        overrides: dict[str, Any] = {
            a.name: override(rename=camel_case(a.name)) for a in attrs.fields(cls)
        }
        return make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **overrides)

    def unstructure_factory(cls: type[Any]) -> Any:
        overrides: dict[str, Any] = {
            a.name: override(rename=camel_case(a.name), omit_if_default=_none_default(a))
            for a in attrs.fields(cls)
        }
        return make_dict_unstructure_fn(cls, converter, **overrides)

    converter.register_structure_hook_factory(attrs.has, structure_factory)
    converter.register_unstructure_hook_factory(attrs.has, unstructure_factory)
    return converter
