"""JSON values as types: what `json.loads` gives and what the store and the wire write.

`JsonValue` is one JSON value, recursively (mypy checks the members of nested
arrays and objects too); `JsonObject` is an object of them. A function that only
hands a value on (to an encoder, to cattrs) takes `object` instead; one that
reads members takes these and narrows with `isinstance`. Both are plain
aliases, defined at run time too, so a value annotated with them can be resolved
(by cattrs, by `typing.get_type_hints`).
"""

from __future__ import annotations

from typing import TypeAlias

JsonValue: TypeAlias = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
"""One JSON value: a string, a number, true or false, null, an array or an object."""

JsonObject: TypeAlias = dict[str, JsonValue]
"""A JSON object: members by name, in the order they are written."""
