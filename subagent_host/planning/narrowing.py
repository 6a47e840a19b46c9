"""A resume's `access` override: it may narrow what the child was launched with, never widen.

The approved ceiling is the stored projection's `access` (all allowed when the
launch did not narrow it). An override names any of `filesystem`, `process`,
`network`; a member it leaves out keeps the ceiling's value. Each member must
be at most the ceiling's (`none` < `read` < `write`; false < true): one that is
more is refused, even beside another that narrows. The narrowed child keeps only
the tools whose effects the new access permits (protocol.md §14.2), as a spawn
with that access would; a child left without tools, or a `command` child (one
program with your own permissions), cannot be narrowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from subagent_host.planning.access import FILESYSTEM_LEVELS, permitted
from subagent_host.planning.request import FilesystemAccess
from subagent_host.planning.views import Access, Projection, RemovedTool, ToolEffects
from subagent_host.values.json_values import JsonValue

MEMBERS: Final = ("filesystem", "process", "network")


def narrowing_problems(projection: Projection, value: JsonValue) -> list[str]:
    """Why `access` cannot be this on resume (empty when it narrows, or keeps, the ceiling)."""
    if not isinstance(value, dict) or not value:
        return ["access must be an object with any of filesystem, process, network"]
    problems = [f"access.{name} is not an access member" for name in value if name not in MEMBERS]
    filesystem = value.get("filesystem")
    if "filesystem" in value and filesystem not in FILESYSTEM_LEVELS:
        problems.append(f"access.filesystem must be one of {', '.join(FILESYSTEM_LEVELS)}")
    problems += [
        f"access.{name} must be true or false"
        for name in ("process", "network")
        if name in value and type(value[name]) is not bool
    ]
    if problems:
        return problems
    ceiling = projection.access or Access()
    asked = narrowed_access(ceiling, value)
    widened = [name for name in MEMBERS if _rank(asked, name) > _rank(ceiling, name)]
    if widened:
        return [
            f"access.{name} may only be narrowed on resume ({_shown(asked, name)} is wider "
            f"than the approved {_shown(ceiling, name)})"
            for name in widened
        ]
    if asked == ceiling:
        return []
    if projection.backend == "command":
        return ["a command child runs a program with your own permissions: it cannot be narrowed"]
    if not kept_tools(projection, asked):
        return ["the narrowed access removes every tool of this child"]
    return []


def narrowed_access(ceiling: Access, value: Mapping[str, JsonValue]) -> Access:
    """The ceiling with the override's members in place of its own (`narrowing_problems`
    refused any member that is not a level, or true or false)."""
    filesystem = value.get("filesystem", ceiling.filesystem)
    process = value.get("process", ceiling.process)
    network = value.get("network", ceiling.network)
    assert isinstance(filesystem, str) and isinstance(process, bool) and isinstance(network, bool)
    return attrs.evolve(
        ceiling, filesystem=FilesystemAccess(filesystem), process=process, network=network
    )


def narrow(
    projection: Projection, value: Mapping[str, JsonValue] | None
) -> tuple[Projection, tuple[RemovedTool, ...] | None]:
    """The projection with the narrowed access and the tools it keeps, and the tools it
    removed, each with the effects beyond it; as it is (and None) when nothing narrows."""
    ceiling = projection.access or Access()
    access = ceiling if value is None else narrowed_access(ceiling, value)
    if access == ceiling:
        return projection, None
    allowed = permitted(access)
    removed = tuple(
        RemovedTool(tool.name, tool.effects, tuple(e for e in tool.effects if e not in allowed))
        for tool in projection.tools
        if not set(tool.effects) <= allowed
    )
    narrowed = attrs.evolve(projection, access=access, tools=kept_tools(projection, access))
    return narrowed, removed


def kept_tools(projection: Projection, access: Access) -> tuple[ToolEffects, ...]:
    """The projection's tools whose effects `access` all permits."""
    allowed = permitted(access)
    return tuple(tool for tool in projection.tools if set(tool.effects) <= allowed)


def _shown(access: Access, name: str) -> str:
    """One member as a problem quotes it: `'read'`, `False`."""
    value = getattr(access, name)
    return repr(str(value) if name == "filesystem" else value)


def _rank(access: Access, name: str) -> int:
    """How much of one member an access allows: a level's place, or 0/1."""
    value = getattr(access, name)
    return FILESYSTEM_LEVELS.index(value) if name == "filesystem" else int(value)
