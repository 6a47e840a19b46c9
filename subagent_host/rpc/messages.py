"""Sort one parsed JSON value into a request, a notification or an invalid request.

JSON-RPC 2.0 §4-§5: a request has `"jsonrpc": "2.0"`, a string `method` and an
`id`; without an `id` it is a notification. We accept ids that are strings or
integers (the specification discourages `null` and fractional ids; we refuse
them, so every answer can be matched to its request), params only as an object
or an array, and no other members.
"""

from __future__ import annotations

from typing import Any, Final, TypeGuard

import attrs

MsgId = str | int

REQUEST_MEMBERS: Final = frozenset({"jsonrpc", "id", "method", "params"})


@attrs.frozen
class Request:
    id: MsgId
    method: str
    params: dict[str, Any] | list[Any] | None


@attrs.frozen
class Notification:
    method: str
    params: dict[str, Any] | list[Any] | None


@attrs.frozen
class InvalidRequest:
    """Answered -32600; `id` is the request's when it could be read, else None."""

    id: MsgId | None
    reason: str


Incoming = Request | Notification | InvalidRequest


def is_valid_id(value: Any) -> TypeGuard[MsgId]:
    return type(value) is int or isinstance(value, str)


def classify(value: Any) -> Incoming:
    """Validate one message (not a batch) against the JSON-RPC 2.0 request shape."""
    if not isinstance(value, dict):
        return InvalidRequest(None, "a request must be a JSON object")
    has_id = "id" in value
    msg_id = value.get("id")
    readable_id = msg_id if has_id and is_valid_id(msg_id) else None
    if value.get("jsonrpc") != "2.0":
        return InvalidRequest(readable_id, '"jsonrpc" must be exactly "2.0"')
    if has_id and readable_id is None:
        return InvalidRequest(None, '"id" must be a string or an integer')
    method = value.get("method")
    if not isinstance(method, str):
        reason = (
            "responses are not accepted: this server sends no requests"
            if "method" not in value and ("result" in value or "error" in value)
            else '"method" must be a string'
        )
        return InvalidRequest(readable_id, reason)
    if len(value) > 2 + has_id + ("params" in value):
        extra = value.keys() - REQUEST_MEMBERS
        return InvalidRequest(readable_id, f"unknown members: {', '.join(sorted(extra))}")
    params = value.get("params")
    if "params" in value and not isinstance(params, dict | list):
        return InvalidRequest(readable_id, '"params" must be an object or an array')
    if readable_id is None:
        return Notification(method, params)
    return Request(readable_id, method, params)
