"""Whether a JSON Schema is portable: read the same by every tool a client may load it into.

JSON Schema 2020-12 allows spellings that narrower readers refuse. MCP clients check
tool schemas before they offer a tool to a model (the MCP Inspector's `--strict`
refuses a tool with a bare boolean schema); OpenAPI-style function declarations
have a single `type`; Ajv in strict mode, common in JavaScript clients, refuses to
compile a union `type` and a `required` name the same schema object does not
declare. The schemas of this project keep to what all of them read:

- no boolean subschema: `{"not": {}}` for a key that must be absent, `{}` for any
  value (`true`/`false` stay only as the value of `additionalProperties` and its
  kin, where every reader takes them);
- no `type` array: `anyOf` branches of one `type` each;
- each name in a schema object's `required` is in that object's own `properties`
  (in a `oneOf`/`anyOf` branch too; Ajv's strictRequired);
- every `$ref` points into the document itself (`#...`): nothing is fetched.

`problems` lists every departure, with where it is; the tests run it over the OpenRPC
document and over every MCP tool's schemas.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

# Keywords whose value may be a boolean in every reader: it is a switch, not a schema.
BOOLEAN_ALLOWED: Final = frozenset(
    {"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}
)
# Keywords whose value is one schema (`items` may also be an array of them, pre-2020).
ONE_SCHEMA: Final = (
    "items",
    "contains",
    "not",
    "propertyNames",
    "if",
    "then",
    "else",
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
    "contentSchema",
)
SCHEMA_LISTS: Final = ("allOf", "anyOf", "oneOf", "prefixItems")
SCHEMA_MAPS: Final = (
    "properties",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "$defs",
    "definitions",
)


def problems(schema: Any, where: str = "") -> list[str]:
    """Every way `schema` (and each schema inside it) is not portable, as `PATH: problem`."""
    return [
        f"{path or '(root)'}: {problem}"
        for path, keyword, node in _subschemas(schema, where, None)
        for problem in _node_problems(node, keyword)
    ]


def _node_problems(node: Any, keyword: str | None) -> Iterator[str]:
    if isinstance(node, bool):
        if keyword not in BOOLEAN_ALLOWED:
            spelled = "{}" if node else '{"not": {}}'
            yield f"a bare `{str(node).lower()}` where a schema object is expected: `{spelled}`"
        return
    if not isinstance(node, dict):
        return
    if isinstance(node.get("type"), list):
        yield f"`type` is an array ({node['type']}): write `anyOf` branches of one type each"
    declared = node.get("properties")
    declared = declared if isinstance(declared, dict) else {}
    for name in node.get("required", ()):
        if name not in declared:
            yield f"requires {name!r} but does not declare it in its own `properties`"
    ref = node.get("$ref")
    if isinstance(ref, str) and not ref.startswith("#"):
        yield f"`$ref` {ref!r} points outside the document"


def _subschemas(node: Any, path: str, keyword: str | None) -> Iterator[tuple[str, str | None, Any]]:
    """`node` and every schema inside it: its path, the keyword holding it, the schema."""
    yield path, keyword, node
    if not isinstance(node, dict):
        return
    for key in SCHEMA_MAPS:
        children = node.get(key)
        if isinstance(children, dict):
            for name, child in children.items():
                yield from _subschemas(child, f"{path}/{key}/{name}", key)
    for key in SCHEMA_LISTS:
        children = node.get(key)
        if isinstance(children, list):
            for index, child in enumerate(children):
                yield from _subschemas(child, f"{path}/{key}/{index}", key)
    for key in ONE_SCHEMA:
        if key not in node:
            continue
        child = node[key]
        if key == "items" and isinstance(child, list):
            for index, item in enumerate(child):
                yield from _subschemas(item, f"{path}/{key}/{index}", key)
        else:
            yield from _subschemas(child, f"{path}/{key}", key)
