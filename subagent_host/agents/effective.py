"""What an agent child runs with: the request, its model profile, its definition, then defaults.

Model and effort resolve in that order: what the request says, then the
matching `model_profiles` entry (a project's profiles apply to the project's
agents, the user's to the user's), then the definition, then the
configuration's `default_model` / `default_effort`. `session_resources`: the
request's, the definition's, the configuration's, else `lean`. Tools: the request's, else
the definition's, else `default_tools`, else the backend's own default. Delegation
tools (agents/delegation.py) are removed from every source: a child never delegates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypeVar

import attrs

from subagent_host.agents.definitions import PROJECT, AgentDefinition
from subagent_host.agents.delegation import without_delegation
from subagent_host.settings import ModelProfile, Settings
from subagent_host.values import LEAN

# An agent child loads as little as its CLI allows unless a definition or setting says `full`.
DEFAULT_SESSION_RESOURCES: Final = LEAN
T = TypeVar("T")


@attrs.frozen
class Effective:
    model: str | None = None
    """The model the item runs with; None: the backend's own default."""
    effort: str | None = None
    """Its thinking effort; None: the backend's own default."""
    tools: tuple[str, ...] | None = None
    """Its tools, delegation tools removed; None: the backend's own default."""
    mode: str | None = None
    """`task` or `background`; None when nothing named one (`background` then)."""
    session_resources: str = DEFAULT_SESSION_RESOURCES
    """`lean` or `full`: what the agent child loads."""
    removed_tools: tuple[str, ...] = ()
    """Delegation tools taken out of the request or the defaults."""


def effective(
    definition: AgentDefinition | None,
    settings: Settings,
    *,
    model: str | None = None,
    effort: str | None = None,
    tools: Sequence[str] | None = None,
    mode: str | None = None,
    session_resources: str | None = None,
) -> Effective:
    """The settings an item runs with; `definition` is None for an item without `agent`."""
    profile = _profile(definition, settings)
    picked_tools = _first(
        tuple(tools) if tools is not None else None,
        definition.tools if definition else None,
        settings.default_tools,
    )
    kept, removed = _without_delegation(picked_tools)
    if tools is None and definition is not None and definition.tools is not None:
        removed = definition.removed_tools  # taken out as the definition was read
    return Effective(
        model=_first(model, profile.model, definition.model if definition else None)
        or settings.default_model,
        effort=_first(effort, profile.effort, definition.effort if definition else None)
        or settings.default_effort,
        tools=kept,
        mode=_first(mode, definition.mode if definition else None, settings.default_mode),
        session_resources=_first(
            session_resources,
            definition.session_resources if definition else None,
            settings.session_resources,
        )
        or DEFAULT_SESSION_RESOURCES,
        removed_tools=removed,
    )


def _profile(definition: AgentDefinition | None, settings: Settings) -> ModelProfile:
    if definition is None:
        return ModelProfile()
    profiles = settings.project_profiles if definition.source == PROJECT else settings.user_profiles
    return profiles.get(definition.key) or ModelProfile()


def _first(*values: T | None) -> T | None:
    return next((value for value in values if value is not None), None)


def _without_delegation(
    tools: tuple[str, ...] | None,
) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    return (None, ()) if tools is None else without_delegation(tools)
