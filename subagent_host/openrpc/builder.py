"""The OpenRPC 1.3 document: the method table and the wire types, as a client sees them.

`methods` holds every method a client sends: those it calls (the table's
entries, each with its params by name, its result and its error codes) and
those it only notifies (`run/detach`, `$/cancelRequest`), marked
`"x-notification": true` and without a `result`, as OpenRPC 1.3 allows.
`x-notifications` holds what the server sends unasked (`run/event`,
`$/progress`), in the same form. Each method and notification also carries
`x-params-schema`, a `$ref` to the schema of its whole params object (the
params of a method are refused when they hold an unknown key).
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Mapping
from typing import Any, Final

import attrs
from lsprotocol.types import (
    CANCEL_REQUEST,
    CancelParams,
    WorkDoneProgressBegin,
    WorkDoneProgressEnd,
    WorkDoneProgressReport,
)

from subagent_host import PROTOCOL_VERSION, SERVER_NAME
from subagent_host.handlers.table import METHODS, MethodSpec, implementation
from subagent_host.openrpc.docstrings import class_description
from subagent_host.openrpc.schemas import Direction, Schema, SchemaBuilder
from subagent_host.rpc.codes import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MEANINGS,
    REQUEST_CANCELLED,
)
from subagent_host.rpc.wire import EventWire, MsgToken

OPENRPC_VERSION: Final = "1.3.2"
ERROR_SCHEMA: Final = "ErrorObject"


@attrs.frozen
class ProgressParams:
    """LSP work-done progress for a run whose `spawn` carried a `workDoneToken`: `begin` when
    it starts, a `report` per child status change, `end` when it is terminal."""

    token: MsgToken
    """The spawn's `workDoneToken`."""
    value: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd
    """The progress, told apart by its `kind`: `begin`, `report` or `end`."""


# What the server sends unasked, and each one's params.
SERVER_NOTIFICATIONS: Final[Mapping[str, type[Any]]] = {
    "run/event": EventWire,
    "$/progress": ProgressParams,
}
# Notifications a client sends that dispatch answers itself, outside the method table.
PROTOCOL_NOTIFICATIONS: Final[Mapping[str, type[Any]]] = {CANCEL_REQUEST: CancelParams}
PROTOCOL_SUMMARIES: Final[Mapping[str, str]] = {
    CANCEL_REQUEST: "Cancel the request with this id if it is still running: it is answered "
    "-32800 (a task-mode spawn or resume stops its run first)."
}
# "(protocol.md §8)" and the like: pointers into documents beside the code, which a
# reader of the schema alone does not have.
REFERENCE: Final = re.compile(r"\s*\((?:protocol\.md|ARCHITECTURE)[^)]*\)")

DESCRIPTION: Final = (
    "JSON-RPC 2.0 over stdin/stdout (NDJSON or LSP framing) that runs coding-agent CLIs "
    "and commands as supervised subagents; protocol.md is the prose specification. "
    "Generated from the server's wire types by `subagent-host schema`. Params are taken "
    "by name and refused with an unknown key; results may gain fields in later versions "
    "of protocol version 1, so clients ignore the keys they do not know. Extensions: "
    "`x-notification` marks a method a client only sends as a notification (no result); "
    "`x-notifications` lists what the server sends unasked; `x-params-schema` is the "
    "schema of a method's whole params object."
)


def build_document() -> dict[str, Any]:
    """The whole document, as JSON values in a fixed order."""
    builder = SchemaBuilder()
    specs = [METHODS[name] for name in sorted(METHODS)]
    methods = [_method(spec, builder) for spec in specs if not spec.notification]
    notified = [spec for spec in specs if spec.notification]
    client_notifications = {
        **{spec.name: spec.params for spec in notified},
        **PROTOCOL_NOTIFICATIONS,
    }
    summaries = {
        **{spec.name: summary_of(spec.handler) for spec in notified},
        **PROTOCOL_SUMMARIES,
    }
    methods += [
        {**_call(name, params, builder, summary=summaries[name]), "x-notification": True}
        for name, params in sorted(client_notifications.items())
    ]
    notifications = [
        _call(name, params, builder, Direction.RESULT, summary=_first_sentence(params))
        for name, params in sorted(SERVER_NOTIFICATIONS.items())
    ]
    builder.components[ERROR_SCHEMA] = _error_schema()
    return {
        "openrpc": OPENRPC_VERSION,
        "info": {"title": SERVER_NAME, "version": PROTOCOL_VERSION, "description": DESCRIPTION},
        "methods": methods,
        "components": {"schemas": dict(sorted(builder.components.items()))},
        "x-notifications": notifications,
    }


def _method(spec: MethodSpec, builder: SchemaBuilder) -> dict[str, Any]:
    answer = implementation(spec.handler)
    return {
        **_call(spec.name, spec.params, builder, summary=summary_of(answer)),
        "result": {"name": "result", "schema": _result_schema(spec.result, builder)},
        "errors": _errors(spec, is_async=inspect.iscoroutinefunction(answer)),
    }


def _result_schema(result_type: Any, builder: SchemaBuilder) -> Schema:
    """A method's result: null for one that answers nothing else (LSP's `shutdown`)."""
    if result_type is None:
        return {"type": "null"}
    return builder.type_schema(result_type, Direction.RESULT)


def summary_of(handler: Any) -> str | None:
    """The first sentence of the handler module's docstring, without its leading
    "`name`:" and its references to other documents: what the method does."""
    doc = sys.modules[handler.__module__].__doc__
    if not doc:
        return None
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    sentence = paragraph.split(". ")[0].removesuffix(".")
    sentence = REFERENCE.sub("", sentence.split(": ", 1)[-1]).strip()
    return sentence[:1].upper() + sentence[1:] + "."


def _call(
    name: str,
    params_type: type[Any],
    builder: SchemaBuilder,
    direction: Direction = Direction.PARAMS,
    *,
    summary: str | None = None,
) -> dict[str, Any]:
    """Name, params by name (each a content descriptor) and the whole params' schema."""
    params = []
    for key, (schema, required) in builder.properties(params_type, direction).items():
        descriptor: dict[str, Any] = {"name": key}
        description = schema.pop("description", None)
        if description:
            descriptor["description"] = description
        descriptor["required"] = required
        descriptor["schema"] = schema
        params.append(descriptor)
    call: dict[str, Any] = {"name": name}
    if summary:
        call["summary"] = summary
    return {
        **call,
        "paramStructure": "by-name",
        "params": params,
        "x-params-schema": builder.ref(params_type, direction),
    }


def _first_sentence(cls: type[Any]) -> str | None:
    description = class_description(cls)
    return description.split(". ")[0].removesuffix(".") + "." if description else None


def _errors(spec: MethodSpec, *, is_async: bool) -> list[dict[str, Any]]:
    """The codes the method may answer: its domain errors' (the spec's `raises`, each
    class's code), invalid params and internal error (any method), request cancelled
    (one that awaits)."""
    codes = {INVALID_PARAMS, INTERNAL_ERROR, *(error.CODE for error in spec.raises)}
    if is_async:
        codes.add(REQUEST_CANCELLED)
    return [{"code": code, "message": MEANINGS[code]} for code in sorted(codes, reverse=True)]


def _error_schema() -> Schema:
    return {
        "type": "object",
        "description": "A JSON-RPC 2.0 error: a code, a short sentence for a person, and "
        "optional data for a program (protocol.md §4).",
        "properties": {
            "code": {"type": "integer", "description": "The error code."},
            "message": {"type": "string", "description": "A short sentence for a person."},
            "data": {"description": "What a program needs; its shape depends on the code."},
        },
        "required": ["code", "message"],
        "additionalProperties": False,
    }
