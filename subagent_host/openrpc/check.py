"""Check what a server sends against the OpenRPC document, with `jsonschema`.

For a client or a test that reads a server's messages: tell the checker each
request sent (`sent`), then pass it each message received (`problems` or
`check`). A reply's `result` is checked against its method's result schema, an
`error` against the JSON-RPC error shape and its code against the method's
`errors`, a notification's params against its `x-params-schema`. `closed=True`
checks results with `additionalProperties: false` on every object the document
leaves open, so a key the schema does not name is caught too (what the
project's own tests use: the document leaves results open for clients).

Needs `jsonschema` (the `conformance` extra); nothing of the server imports it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Final

try:
    import jsonschema
    from jsonschema.validators import Draft202012Validator
except ImportError as missing:  # pragma: no cover - said plainly, not as a bare ImportError
    raise ImportError(
        "checking messages against the schema needs jsonschema: "
        "pip install 'subagent-host[conformance]'"
    ) from missing

from subagent_host.openrpc.builder import ERROR_SCHEMA
from subagent_host.openrpc.schemas import REF_PREFIX

JSONRPC: Final = "2.0"
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
# RFC 3339 date-time, which `format: date-time` names (jsonschema checks it only with an
# optional extra package installed, so it is checked here).
DATE_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
RESPONSE_MEMBERS: Final = frozenset({"jsonrpc", "id", "result", "error"})


class NonConforming(AssertionError):
    """A message does not match the schema; the message lists every problem found."""


def is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True  # not a string: `type` says so, not `format`
    if DATE_TIME.fullmatch(value) is None:
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def close_objects(schema: Any) -> Any:
    """A copy with `additionalProperties: false` on every object schema that names its
    properties and leaves other keys open."""
    if isinstance(schema, dict):
        closed = {key: close_objects(value) for key, value in schema.items()}
        if closed.get("type") == "object" and "properties" in closed:
            closed.setdefault("additionalProperties", False)
        return closed
    if isinstance(schema, list):
        return [close_objects(item) for item in schema]
    return schema


class MessageChecker:
    """Checks the messages of one connection against an OpenRPC document."""

    def __init__(self, document: Mapping[str, Any], *, closed: bool = False) -> None:
        components = document["components"]
        self._components = close_objects(components) if closed else copy.deepcopy(components)
        self._methods = {method["name"]: method for method in document["methods"]}
        self._notifications = {item["name"]: item for item in document["x-notifications"]}
        self._validators: dict[str, Draft202012Validator] = {}
        self._pending: dict[Any, str] = {}  # request id -> method, until it is answered
        self._formats = jsonschema.FormatChecker(formats=())
        self._formats.checks("date-time")(is_date_time)

    def sent(self, message: Any) -> None:
        """Note a request (or a batch) sent, so that its reply is checked as its method's."""
        for item in message if isinstance(message, list) else [message]:
            if isinstance(item, dict) and "id" in item and isinstance(item.get("method"), str):
                self._pending[_key(item["id"])] = item["method"]

    def check(self, message: Any) -> None:
        """Raise `NonConforming` listing every problem of a received message (or batch)."""
        found = self.problems(message)
        if found:
            raise NonConforming(
                "a message the server sent does not match schema/openrpc.json:\n  "
                + "\n  ".join(found)
                + f"\nmessage: {message!r}"[:4000]
            )

    def problems(self, message: Any) -> list[str]:
        """Every way a received message (or batch of replies) departs from the document."""
        if isinstance(message, list):
            if not message:
                return ["an empty array"]
            return [problem for item in message for problem in self._message(item)]
        return self._message(message)

    def _message(self, message: Any) -> list[str]:
        if not isinstance(message, dict):
            return [f"not an object: {message!r}"[:200]]
        if message.get("jsonrpc") != JSONRPC:
            return ['"jsonrpc" is not "2.0"']
        if "method" in message:
            if "id" in message:
                return [f"a request from the server ({message['method']!r}): it sends none"]
            return self._notification(message)
        return self._response(message)

    def _notification(self, message: dict[str, Any]) -> list[str]:
        name = message["method"]
        notification = self._notifications.get(name)
        if notification is None:
            return [f"notification {name!r} is not in x-notifications"]
        if set(message) - {"jsonrpc", "method", "params"}:
            return [f"notification {name!r} has members besides jsonrpc, method and params"]
        where = f"params of notification {name!r}"
        return self._validate(notification["x-params-schema"], message.get("params"), where)

    def _response(self, message: dict[str, Any]) -> list[str]:
        if "id" not in message or set(message) - RESPONSE_MEMBERS:
            return [f"not a response: members {sorted(message)}"]
        if ("result" in message) == ("error" in message):
            return ["a response must hold exactly one of result and error"]
        name = self._pending.pop(_key(message["id"]), None)
        method = self._methods.get(name) if name is not None else None
        if "result" in message:
            if method is None or "result" not in method:
                return []  # a reply to a request this checker was not told of
            where = f"result of {name!r}"
            return self._validate(method["result"]["schema"], message["result"], where)
        error = message["error"]
        found = self._validate({"$ref": REF_PREFIX + ERROR_SCHEMA}, error, "error")
        if found or method is None:
            return found
        allowed = {item["code"] for item in method.get("errors", ())} | {INVALID_REQUEST}
        if method.get("x-notification"):
            allowed.add(METHOD_NOT_FOUND)
        if error["code"] not in allowed:
            return [f"error code {error['code']} is not among the errors of {name!r}"]
        return []

    def _validate(self, schema: Mapping[str, Any], value: Any, where: str) -> list[str]:
        validator = self._validator(schema)
        return [
            f"{where}{_path(error.absolute_path)}: {_explained(error)}"[:600]
            for error in _sorted(validator.iter_errors(value))
        ]

    def _validator(self, schema: Mapping[str, Any]) -> Draft202012Validator:
        key = repr(sorted(schema.items()))
        validator = self._validators.get(key)
        if validator is None:
            # `$ref`s point into `#/components`: the root resource carries them.
            root = {**schema, "components": self._components}
            validator = Draft202012Validator(root, format_checker=self._formats)
            self._validators[key] = validator
        return validator


def _explained(error: jsonschema.ValidationError) -> str:
    """The error, and for a failed `oneOf` the problem of the alternative that fit best."""
    if not error.context:
        return error.message
    # The alternative that fit furthest: its error lies deepest in the value.
    closest = max(error.context, key=lambda inner: len(inner.path))
    return f"{error.message[:200]} (closest: {_path(closest.absolute_path)} {closest.message})"


def _key(msg_id: Any) -> tuple[str, Any]:
    """Ids `1` and `"1"` are different requests."""
    return (type(msg_id).__name__, msg_id)


def _path(path: Any) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


def _sorted(errors: Iterator[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    return sorted(errors, key=lambda error: [str(part) for part in error.absolute_path])
