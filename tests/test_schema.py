"""The OpenRPC document: generated from the code, committed, and itself valid."""

from __future__ import annotations

import asyncio
import enum
import inspect
import json
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import attrs
import pytest
from jsonschema.validators import Draft202012Validator

from subagent_host.handlers.table import METHODS, implementation
from subagent_host.openrpc import render
from subagent_host.openrpc.check import MessageChecker, NonConforming
from subagent_host.openrpc.schemas import Direction, SchemaBuilder
from subagent_host.rpc.codes import MEANINGS
from subagent_host.runs.state import RunStatus
from subagent_host.values.events import EVENT_CLASSES
from tests.e2e.harness import SCHEMA, schema_document, server_executable

REGENERATE: Final = "subagent-host schema > schema/openrpc.json"
# Fields of lsprotocol's types that carry no docstring of their own.
UNDOCUMENTED: Final = {
    ("WorkDoneProgressBegin", "kind"),
    ("WorkDoneProgressReport", "kind"),
    ("WorkDoneProgressEnd", "kind"),
}


def document() -> dict[str, Any]:
    return schema_document()


def schemas_in(document: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every JSON Schema the document holds, with where it is."""
    for name, schema in document["components"]["schemas"].items():
        yield f"components.schemas.{name}", schema
    for kind in ("methods", "x-notifications"):
        for method in document[kind]:
            yield f"{method['name']}.x-params-schema", method["x-params-schema"]
            for param in method["params"]:
                yield f"{method['name']}.params.{param['name']}", param["schema"]
            if "result" in method:
                yield f"{method['name']}.result", method["result"]["schema"]


def test_the_committed_schema_is_what_the_code_generates() -> None:
    assert SCHEMA.read_text() == render(), (
        f"schema/openrpc.json is out of date with the wire types: run `{REGENERATE}`"
    )


def test_the_schema_command_prints_the_document() -> None:
    async def run() -> tuple[int, bytes]:
        proc = await asyncio.create_subprocess_exec(
            server_executable(), "schema", stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        return await proc.wait(), out

    code, out = asyncio.run(run())
    assert code == 0
    assert out.decode() == render()
    assert out.endswith(b"}\n") and json.loads(out)["openrpc"].startswith("1.3.")


def test_every_schema_in_the_document_is_valid_json_schema_2020_12() -> None:
    for where, schema in schemas_in(document()):
        try:
            Draft202012Validator.check_schema(schema)
        except Exception as exc:  # noqa: BLE001 - reported with where it is
            pytest.fail(f"{where}: {exc}")


def test_every_ref_points_at_a_component() -> None:
    names = set(document()["components"]["schemas"])
    text = SCHEMA.read_text()
    refs = {ref.split('"')[0] for ref in text.split('"$ref": "#/components/schemas/')[1:]}
    assert refs and refs <= names


def test_the_document_has_the_members_openrpc_1_3_requires() -> None:
    doc = document()
    assert doc["openrpc"].startswith("1.3.")
    assert {"title", "version"} <= doc["info"].keys()
    for method in (*doc["methods"], *doc["x-notifications"]):
        assert isinstance(method["name"], str) and isinstance(method["params"], list)
        for param in method["params"]:
            assert {"name", "schema", "required"} <= param.keys(), param
        if "result" in method:
            assert {"name", "schema"} <= method["result"].keys()
            assert all({"code", "message"} <= error.keys() for error in method["errors"])


def test_every_method_of_the_table_is_in_the_document_and_no_other() -> None:
    methods = {method["name"]: method for method in document()["methods"]}
    called = [name for name, spec in METHODS.items() if not spec.notification]
    notified = [name for name, spec in METHODS.items() if spec.notification]
    assert set(methods) == {*METHODS, "$/cancelRequest"}
    for name in called:
        assert "result" in methods[name] and "x-notification" not in methods[name], name
    for name in (*notified, "$/cancelRequest"):
        assert methods[name]["x-notification"] is True and "result" not in methods[name]
    notifications = {item["name"] for item in document()["x-notifications"]}
    assert notifications == {"run/event", "$/progress"}


def test_each_method_and_notification_says_what_it_does_in_one_sentence() -> None:
    for method in (*document()["methods"], *document()["x-notifications"]):
        summary = method["summary"]
        assert summary[0].isupper() and summary.endswith(".") and "protocol.md" not in summary


def test_each_method_lists_the_codes_it_can_answer() -> None:
    errors = {
        method["name"]: [error["code"] for error in method["errors"]]
        for method in document()["methods"]
        if "errors" in method
    }
    assert errors["ping"] == [-32602, -32603]  # answered inline: nothing to cancel
    assert errors["status"] == [-32001, -32006, -32602, -32603, -32800]
    assert {-32002, -32003, -32005} <= set(errors["spawn"])
    assert -32004 in errors["resume"]


def test_each_method_lists_exactly_the_errors_its_spec_declares() -> None:
    methods = {method["name"]: method for method in document()["methods"]}
    for name, spec in METHODS.items():
        if spec.notification:
            assert "errors" not in methods[name], name
            continue
        declared = {error.CODE for error in spec.raises} | {-32602, -32603}
        if inspect.iscoroutinefunction(implementation(spec.handler)):
            declared.add(-32800)  # a call that awaits can be cancelled
        listed = [(error["code"], error["message"]) for error in methods[name]["errors"]]
        assert listed == [(code, MEANINGS[code]) for code in sorted(declared, reverse=True)]


def test_params_refuse_unknown_keys_and_results_leave_room_for_new_ones() -> None:
    schemas = document()["components"]["schemas"]
    for name in ("SpawnParams", "SpawnItem", "WorkflowRequest", "ResumeRequest", "StopParams"):
        assert schemas[name]["additionalProperties"] is False, name
    for name in ("RunSnapshot", "PingResult", "ChildSnapshot", "NormalizedPlan"):
        assert "additionalProperties" not in schemas[name], name


def test_wire_names_are_camel_case_with_inline_fields_in_place() -> None:
    schemas = document()["components"]["schemas"]
    snapshot = schemas["RunSnapshot"]["properties"]
    assert "outcome" not in snapshot and {"startedAt", "durationMs", "output"} <= set(snapshot)
    assert list(snapshot)[:6] == [
        "runId",
        "sessionId",
        "kind",
        "status",
        "createdAt",
        "fingerprint",
    ]
    assert "as" in schemas["StepSnapshot"]["properties"]
    assert "forEach" in schemas["ForEachStep"]["properties"]
    assert schemas["RunSnapshot"]["properties"]["createdAt"]["format"] == "date-time"


def test_only_fields_always_sent_are_required() -> None:
    schemas = document()["components"]["schemas"]
    assert "admittedBy" in schemas["RunSnapshot"]["required"]
    assert "label" not in schemas["RunSnapshot"]["required"]
    assert "startedAt" not in schemas["RunSnapshot"]["required"]
    assert "leftoversEnded" in schemas["Resources"]["required"]  # a default of 0 is sent
    # Absent fields are omitted, never null: a projection's `model` too, though it is stored
    # with its null.
    model = schemas["Projection"]["properties"]["model"]
    assert model["type"] == "string" and "model" not in schemas["Projection"]["required"]
    assert '"null"' not in json.dumps(schemas)
    assert schemas["SpawnParams"].get("required", []) == []
    assert schemas["StopParams"]["required"] == ["runId"]


def test_fixed_sets_of_values_are_enums_taken_from_the_code() -> None:
    schemas = document()["components"]["schemas"]
    statuses = [str(status) for status in RunStatus]
    assert schemas["RunSnapshot"]["properties"]["status"]["enum"] == statuses
    assert schemas["EventWire"]["properties"]["type"]["enum"] == list(EVENT_CLASSES)
    # A backend may be a configured ACP agent's name: a pattern, the built-in ones as examples.
    assert schemas["ChildSnapshot"]["properties"]["backend"] == {
        "type": "string",
        "pattern": "^(?:[a-z][a-z0-9-]{0,31})$",
        "examples": ["command", "pi", "claude", "codex"],
        "description": schemas["ChildSnapshot"]["properties"]["backend"]["description"],
    }


def test_every_wire_field_has_its_docstring_as_description() -> None:
    missing = [
        (name, key)
        for name, schema in document()["components"]["schemas"].items()
        for key, prop in schema.get("properties", {}).items()
        if "description" not in prop and (name, key) not in UNDOCUMENTED
    ]
    assert missing == []
    prop = document()["components"]["schemas"]["Limits"]["properties"]["graceMs"]
    assert prop["description"].startswith("Milliseconds a stopped tree gets between SIGTERM")


def test_run_event_is_a_union_by_type() -> None:
    checker = MessageChecker(document(), closed=True)
    base = {"runId": "r1", "seq": 1, "at": "2026-11-30T02:47:37.415Z"}
    good = [
        {**base, "type": "status", "status": "queued"},
        {**base, "type": "child", "index": 0, "status": "running"},
        {**base, "type": "output", "index": 0, "text": "hi\n"},
        {**base, "type": "activity", "index": 0, "text": "reading"},
    ]
    for params in good:
        assert checker.problems(notification("run/event", params)) == [], params
    bad = [
        {**base, "type": "status"},  # no status
        {**base, "type": "output", "index": 0, "text": "x", "status": "running"},
        {**base, "type": "child", "index": 0, "status": "running", "extra": 1},
        {**base, "type": "status", "status": "queued", "at": "yesterday"},
        {**base, "type": "tick", "status": "queued"},
    ]
    for params in bad:
        assert checker.problems(notification("run/event", params)) != [], params


def test_the_checker_says_what_is_wrong_with_a_reply() -> None:
    checker = MessageChecker(document(), closed=True)
    checker.sent({"jsonrpc": "2.0", "id": 7, "method": "status", "params": {}})
    with pytest.raises(NonConforming, match=r"result of 'status'.*runs\[0\]"):
        checker.check({"jsonrpc": "2.0", "id": 7, "result": {"runs": [{"runId": "r"}]}})
    checker.sent({"jsonrpc": "2.0", "id": 8, "method": "ping"})
    with pytest.raises(NonConforming, match="error code -32004 is not among the errors of 'ping'"):
        checker.check({"jsonrpc": "2.0", "id": 8, "error": {"code": -32004, "message": "no"}})
    with pytest.raises(NonConforming, match="error"):
        checker.check({"jsonrpc": "2.0", "id": None, "error": {"code": "x", "message": "m"}})
    with pytest.raises(NonConforming, match="not in x-notifications"):
        checker.check(notification("run/evnet", {}))


def test_an_open_checker_lets_results_carry_new_keys_and_a_closed_one_does_not() -> None:
    summary = {"runId": "r", "kind": "single", "status": "queued", "new": 1,
               "createdAt": "2026-11-30T02:47:37.415Z"}  # fmt: skip
    found = {}
    for closed in (False, True):
        checker = MessageChecker(document(), closed=closed)
        checker.sent({"jsonrpc": "2.0", "id": 1, "method": "status"})
        found[closed] = checker.problems({"jsonrpc": "2.0", "id": 1, "result": {"runs": [summary]}})
    assert found[False] == []
    assert "'new' was unexpected" in found[True][0]


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def test_the_schema_file_sits_where_the_package_says() -> None:
    assert SCHEMA == Path(__file__).resolve().parent.parent / "schema" / "openrpc.json"


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


Name = typing.NewType("Name", str)


@attrs.frozen
class Sketch:
    """A type a later wire type might be written with."""

    names: list[Name]
    """Some names."""
    extra: Mapping[str, Any]
    """Free-form."""
    colour: Colour = Colour.RED
    """Always sent: its default is not None."""
    shape: typing.Literal["square"] | None = None
    """Left out while unset."""


def test_the_generator_describes_the_types_a_later_wire_type_may_use() -> None:
    builder = SchemaBuilder()
    assert builder.object_schema(Sketch, Direction.RESULT) == {
        "type": "object",
        "description": "A type a later wire type might be written with.",
        "properties": {
            "names": {"type": "array", "items": {"type": "string"}, "description": "Some names."},
            "extra": {"type": "object", "description": "Free-form."},
            "colour": {
                "type": "string",
                "enum": ["red", "blue"],
                "description": "Always sent: its default is not None.",
            },
            "shape": {"type": "string", "const": "square", "description": "Left out while unset."},
        },
        "required": ["names", "extra", "colour"],
    }
    params = builder.object_schema(Sketch, Direction.PARAMS)
    assert params["required"] == ["names", "extra"] and params["additionalProperties"] is False
