"""The one rule for delegation tools (agents/delegation.py)."""

from __future__ import annotations

import pytest

from subagent_host.agents.delegation import is_delegation_tool, without_delegation


@pytest.mark.parametrize(
    "name",
    [
        "subagent_spawn",
        "SUBAGENT_",
        "Subagent_Run",
        "agent_profiles_subagent_x",
        "Agent_Profiles_SubAgent_y",
    ],
)
def test_names_with_either_prefix_in_any_case_are_delegation_tools(name: str) -> None:
    assert is_delegation_tool(name)


@pytest.mark.parametrize(
    "name",
    ["subagent", "my_subagent_tool", "agent_profiles_list", "agent_profiles_subagent", "read"],
)
def test_other_names_are_not(name: str) -> None:
    assert not is_delegation_tool(name)


def test_without_delegation_keeps_the_order_of_both_parts() -> None:
    tools = ["read", "SUBAGENT_a", "grep", "agent_profiles_subagent_b"]
    assert without_delegation(tools) == (
        ("read", "grep"),
        ("SUBAGENT_a", "agent_profiles_subagent_b"),
    )
