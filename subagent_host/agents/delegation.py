"""The one rule for delegation tools: a child must not delegate further through them.

A tool whose name starts with `subagent_` or `agent_profiles_subagent_`, in any case
(`Subagent_Spawn`, `AGENT_PROFILES_SUBAGENT_RUN`), starts or steers subagents. It is
taken out of every list a child's tools come from (the request's `tools`, an agent
definition's, `default_tools`), wherever that list is read (agents/definitions.py,
agents/effective.py), and the removal is said (`tools-removed`, info). The depth
limit (protocol.md §7) refuses a child's own spawns besides; this keeps it from
being offered the tools at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

DELEGATION_PREFIXES: Final = ("subagent_", "agent_profiles_subagent_")
"""Lowercase: a name is compared in lowercase (a safety rule, not a spelling check)."""
WHY: Final = "a child must not delegate further through these tools"


def is_delegation_tool(name: str) -> bool:
    return name.lower().startswith(DELEGATION_PREFIXES)


def without_delegation(tools: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the tools kept, the delegation tools removed), each in the order given."""
    kept: list[str] = []
    removed: list[str] = []
    for tool in tools:
        (removed if is_delegation_tool(tool) else kept).append(tool)
    return tuple(kept), tuple(removed)
