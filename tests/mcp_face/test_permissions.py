"""A permission as the face asks it: the elicitation's form, the answer read from it, who
can be asked, and `approvals: "client"` sent as `policy` when nobody can."""

from __future__ import annotations

from typing import Any, Final

import mcp_types as types
import pytest
from mcp_types._v2025_11_25 import PrimitiveSchemaDefinition, RequestedSchema
from pydantic import TypeAdapter

from subagent_host.mcp_face.arguments import SpawnArguments
from subagent_host.mcp_face.permissions import by_policy, can_elicit, chosen, question
from subagent_host.mcp_face.tools import TOOLS, read_arguments
from subagent_host.values.choices import OptionKind, ToolKind
from subagent_host.values.interaction import PendingPermission, PermissionOption

ASKED: Final = PendingPermission(
    index=1,
    permission_id="p1",
    name="Bash",
    kind=ToolKind.EXECUTE,
    summary="printf x > written.txt",
    options=(
        PermissionOption("allow", "Allow", OptionKind.ALLOW_ONCE),
        PermissionOption("always", "Always allow", OptionKind.ALLOW_ALWAYS),
        PermissionOption("never", "Never", OptionKind.REJECT_ALWAYS),
        PermissionOption("deny", "Deny", OptionKind.REJECT_ONCE),
    ),
)


def test_the_question_names_the_tool_and_offers_each_option_in_a_form_the_spec_allows() -> None:
    message, schema = question("r1", ASKED)
    assert message == "Run r1, child 1, asks to use the tool Bash (execute): printf x > written.txt"
    RequestedSchema.model_validate(schema)
    answer = schema["properties"]["answer"]
    TypeAdapter(PrimitiveSchemaDefinition).validate_python(answer)
    assert answer["oneOf"] == [
        {"const": "allow", "title": "Allow (allow-once)"},
        {"const": "always", "title": "Always allow (allow-always)"},
        {"const": "never", "title": "Never (reject-always)"},
        {"const": "deny", "title": "Deny (reject-once)"},
    ]
    assert schema["required"] == ["answer"]


@pytest.mark.parametrize(
    ("result", "option_id"),
    [
        (types.ElicitResult(action="accept", content={"answer": "always"}), "always"),
        (types.ElicitResult(action="accept", content={"answer": "never"}), "never"),
        (types.ElicitResult(action="decline"), "deny"),
        (types.ElicitResult(action="cancel"), "deny"),
        (types.ElicitResult(action="accept", content={"answer": "maybe"}), "deny"),
        (types.ElicitResult(action="accept"), "deny"),
        (None, "deny"),  # the client failed to ask
    ],
)
def test_the_answer_is_the_option_chosen_else_the_narrowest_reject(
    result: types.ElicitResult | None, option_id: str
) -> None:
    option = chosen(ASKED, result)
    assert option is not None
    assert option.option_id == option_id


def test_a_permission_without_a_reject_option_is_not_refused_by_the_face() -> None:
    allow_only = PendingPermission(
        index=0,
        permission_id="p2",
        name="Bash",
        kind=ToolKind.EXECUTE,
        summary="ls",
        options=(PermissionOption("ok", "OK", OptionKind.ALLOW_ONCE),),
    )
    assert chosen(allow_only, types.ElicitResult(action="decline")) is None


FORM: Final = types.FormElicitationCapability()
URL: Final = types.UrlElicitationCapability()


@pytest.mark.parametrize(
    ("elicitation", "version", "can"),
    [
        (types.ElicitationCapability(form=FORM), "2025-11-25", True),
        (types.ElicitationCapability(), "2025-06-18", True),  # empty: form, as before modes
        (types.ElicitationCapability(url=URL), "2025-11-25", False),  # URL mode only
        (None, "2025-11-25", False),
        (types.ElicitationCapability(form=FORM), "2026-07-28", False),  # no server requests
    ],
)
def test_who_can_be_asked(
    elicitation: types.ElicitationCapability | None, version: str, can: bool
) -> None:
    assert can_elicit(types.ClientCapabilities(elicitation=elicitation), version) is can
    assert can_elicit(None, "2025-11-25") is False


def spawn_arguments(arguments: dict[str, Any]) -> SpawnArguments:
    read = read_arguments(TOOLS["spawn"], arguments)
    assert isinstance(read, SpawnArguments)
    return read


def test_client_approvals_become_policy_everywhere_in_the_arguments_and_nothing_else() -> None:
    item = {"prompt": "a", "backend": "claude"}
    client = {**item, "approvals": "client"}
    arguments = spawn_arguments(
        {
            "approvals": "client",
            "workflow": {
                "name": "w",
                "task": "t",
                "chain": [
                    client,
                    {"parallel": [item, {**item, "approvals": "cli"}, client]},
                    {"forEach": "[1]", "item": client},
                ],
            },
            "waitSeconds": 5,
        }
    )
    expected = spawn_arguments(
        {
            "approvals": "policy",
            "workflow": {
                "name": "w",
                "task": "t",
                "chain": [
                    {**item, "approvals": "policy"},
                    {
                        "parallel": [
                            item,
                            {**item, "approvals": "cli"},
                            {**item, "approvals": "policy"},
                        ]
                    },
                    {"forEach": "[1]", "item": {**item, "approvals": "policy"}},
                ],
            },
            "waitSeconds": 5,
        }
    )
    assert by_policy(arguments) == expected
    tasks = spawn_arguments({"tasks": [client, item]})
    assert (
        by_policy(tasks).tasks
        == spawn_arguments({"tasks": [{**item, "approvals": "policy"}, item]}).tasks
    )
    untouched = spawn_arguments({"chain": [item, {**item, "approvals": "cli"}]})
    assert by_policy(untouched) is untouched
