"""The schemas are portable: no boolean subschemas, no `type` arrays, every required name
declared where it is required (protocol.md §20), in the OpenRPC document and in every MCP
tool's schemas; and a strict JavaScript reader (Ajv, strict mode) compiles each of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import attrs

from subagent_host.mcp_face.tools import TOOLS
from subagent_host.openrpc import portable
from subagent_host.openrpc.schemas import REF_PREFIX, Direction, SchemaBuilder, never
from subagent_host.values.events import EVENT_CLASSES
from tests.schema_readers import AJV, AJV_STRICT, ANY_NODE, installed, node_at_least, run
from tests.test_schema import document, schemas_in

AJV_TIMEOUT_S: Final = 90.0  # within the suite's 120 s per test


def tool_schemas() -> dict[str, Any]:
    """Each MCP tool's `inputSchema` and `outputSchema`, by where they are."""
    found: dict[str, Any] = {}
    for name, tool in TOOLS.items():
        found[f"{name}.inputSchema"] = tool.input_schema()
        found[f"{name}.outputSchema"] = tool.output_schema()
    return found


def test_every_schema_in_the_document_is_portable() -> None:
    found = [
        problem
        for where, schema in schemas_in(document())
        for problem in portable.problems(schema, where)
    ]
    assert found == []


def test_every_mcp_tool_schema_is_portable() -> None:
    found = [
        problem
        for where, schema in tool_schemas().items()
        for problem in portable.problems(schema, where)
    ]
    assert found == []


def test_the_check_names_each_unportable_spelling_and_where_it_is() -> None:
    assert portable.problems({"properties": {"a": False}}) == [
        '/properties/a: a bare `false` where a schema object is expected: `{"not": {}}`'
    ]
    assert portable.problems({"type": "array", "items": True}, "x") == [
        "x/items: a bare `true` where a schema object is expected: `{}`"
    ]
    assert portable.problems({"type": ["integer", "string"]}) == [
        "(root): `type` is an array (['integer', 'string']): "
        "write `anyOf` branches of one type each"
    ]
    branch = {"type": "object", "properties": {"a": {}}, "oneOf": [{"required": ["a"]}]}
    assert portable.problems(branch) == [
        "/oneOf/0: requires 'a' but does not declare it in its own `properties`"
    ]
    assert portable.problems({"$defs": {"A": {"$ref": "https://example.com/a.json"}}}) == [
        "/$defs/A: `$ref` 'https://example.com/a.json' points outside the document"
    ]


def test_the_check_takes_what_every_reader_takes() -> None:
    fine = {
        "type": "object",
        "properties": {
            "not": {"type": "string"},  # a property's name, not the keyword
            "flag": {"enum": [False, True]},  # values, not schemas
            "never": never(),
            "any": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "ref": {"$ref": "#/$defs/A"},
        },
        "required": ["not", "flag"],
        "additionalProperties": False,
        "$defs": {"A": {"type": "object", "unevaluatedProperties": False}},
    }
    assert portable.problems(fine) == []


@attrs.frozen
class Mixed:
    """Unions of primitives."""

    token: int | str
    """An id or a name."""
    amount: int | float | None = None
    """Whole or not."""


def test_a_union_of_primitives_is_any_of_its_types() -> None:
    schema = SchemaBuilder().object_schema(Mixed, Direction.PARAMS)
    assert schema["properties"]["token"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "description": "An id or a name.",
    }
    # `anyOf`, not `oneOf`: 3 is an integer and a number, and is an amount.
    assert schema["properties"]["amount"]["anyOf"] == [{"type": "integer"}, {"type": "number"}]


def test_each_event_branch_declares_what_it_requires_and_forbids_what_it_never_carries() -> None:
    event = document()["components"]["schemas"]["EventWire"]
    assert [branch["title"] for branch in event["oneOf"]] == list(EVENT_CLASSES)
    for branch in event["oneOf"]:
        declared = branch["properties"]
        for name in branch["required"]:
            whole = {k: v for k, v in event["properties"][name].items() if k != "description"}
            assert declared[name] == whole, (branch["title"], name)
        forbidden = {name for name, schema in declared.items() if schema == never()}
        assert forbidden and forbidden.isdisjoint(branch["required"])
        assert forbidden <= set(event["properties"]) - set(event["required"])
    status = next(branch for branch in event["oneOf"] if branch["title"] == "status")
    assert status["properties"]["index"] == {"not": {}}


# Spellings the document once held: Ajv's strict mode refuses them (a union `type`, a
# branch requiring a name it does not declare), and so does the check.
UNPORTABLE: Final = {
    "unportable.union": {"type": "object", "properties": {"id": {"type": ["integer", "string"]}}},
    "unportable.branch": {
        "type": "object",
        "properties": {"status": {"type": "string"}},
        "oneOf": [{"required": ["status"]}],
    },
}


def component_documents() -> dict[str, Any]:
    """Each component schema as a document of its own: it, and every component under
    `$defs`, with `$ref`s pointing there."""
    schemas = document()["components"]["schemas"]
    text = json.dumps(schemas).replace(f'"{REF_PREFIX}', '"#/$defs/')
    defs = json.loads(text)
    return {
        f"components.schemas.{name}": {"$defs": defs, "$ref": f"#/$defs/{name}"} for name in defs
    }


async def test_ajv_in_strict_mode_compiles_every_component_and_every_tool_schema(
    tmp_path: Path,
) -> None:
    node = await node_at_least(ANY_NODE)
    installed(AJV, "ajv")
    schemas = {**component_documents(), **tool_schemas(), **UNPORTABLE}
    given = tmp_path / "schemas.json"
    given.write_text(json.dumps(schemas))
    code, out, err = await run(node, str(AJV_STRICT), str(given), within_s=AJV_TIMEOUT_S)
    assert code == 0, err.decode()
    refused = json.loads(out)
    assert sorted(refused) == sorted(UNPORTABLE), refused  # what it refuses, and nothing else
    assert "strictTypes" in refused["unportable.union"]
    assert "strictRequired" in refused["unportable.branch"]
    for schema in UNPORTABLE.values():
        assert portable.problems(schema) != []  # the check refuses them too
