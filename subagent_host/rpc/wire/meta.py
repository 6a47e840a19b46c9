"""`_meta`: what every method's params may carry besides their own fields."""

from __future__ import annotations

from typing import Any, Final

from subagent_host.rpc.wire.basics import WireValueError, json_type_name

META: Final = "_meta"
"""The key every method's params object may carry besides its own fields (as MCP and ACP
do): a JSON object, ignored. Not a field of any params type: `without_meta` takes it out
before the params are structured, and a schema adds it to every params object
(`META_SCHEMA`)."""

META_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "description": "Anything the client wants to carry with the request; the server ignores it.",
}
"""The JSON Schema of `_meta` in every method's params."""


def without_meta(params: dict[str, Any]) -> dict[str, Any]:
    """The params without `_meta`; raises WireValueError when `_meta` is not an object.

    Called by dispatch on every params object before it is structured: the one place
    `_meta` is read.
    """
    if META not in params:
        return params
    meta = params[META]
    if not isinstance(meta, dict):
        raise WireValueError(f"expected an object, got {json_type_name(meta)}")
    return {key: value for key, value in params.items() if key != META}
