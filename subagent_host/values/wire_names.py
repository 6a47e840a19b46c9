"""A field's key in JSON on the wire and in the views: its name in camelCase, or the
name the field declares.

A field is named in Python for what it holds; its key is the protocol's. The two
differ only where the protocol's word cannot be, or does not say, the Python name:
a workflow's output name is `as` on the wire (a Python keyword), the template a
`forEach` step runs over is `forEach` (the step's kind, not what the field holds).
Such a field declares its key once, in its metadata (`attrs.field(metadata={WIRE_NAME:
"as"})`), and every reader of keys asks `wire_name`: the wire's converter
(`rpc/wire/converter.py`), the views' (`planning/views.py`), a -32602's paths
(`rpc/param_problems.py`) and the OpenRPC document (`openrpc/schemas.py`). Stored
records spell fields as declared in Python (`planning/record_form.py`), so the
Python name is also the records' name.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from subagent_host.values import camel_case

WIRE_NAME: Final = "wire_name"
"""The metadata key of a field whose wire name is not its name in camelCase."""


def wire_name(field: attrs.Attribute[Any]) -> str:
    """The field's key: the one it declares, else its name in camelCase."""
    declared = field.metadata.get(WIRE_NAME)
    return declared if isinstance(declared, str) else camel_case(field.name)


def wire_name_of(cls: type[Any], name: str) -> str:
    """The key of `cls`'s field `name` (its camelCase when `cls` has no such attrs field)."""
    fields = attrs.fields_dict(cls) if attrs.has(cls) else {}
    return wire_name(fields[name]) if name in fields else camel_case(name)
