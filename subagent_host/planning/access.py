"""What a request's `access` permits, and which of a child's tools it leaves.

An access level is a set of effects (`backends/base.py` EFFECTS); a tool whose
effects are not all permitted is removed from the child. Receipts and the plan
report both what is kept and what was removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from subagent_host.backends.base import (
    EFFECTS,
    FILESYSTEM_READ,
    FILESYSTEM_WRITE,
    NETWORK,
    PROCESS,
    Backend,
)
from subagent_host.planning.request import FilesystemAccess
from subagent_host.planning.views import Access
from subagent_host.values.choices import Effect

FILESYSTEM_LEVELS: Final = tuple(level.value for level in FilesystemAccess)


def permitted(access: Access) -> frozenset[Effect]:
    """The effects this access permits."""
    effects = set()
    if access.filesystem in ("read", "write"):
        effects.add(FILESYSTEM_READ)
    if access.filesystem == "write":
        effects.add(FILESYSTEM_WRITE)
    if access.process:
        effects.add(PROCESS)
    if access.network:
        effects.add(NETWORK)
    return frozenset(effects)


def unpermitted_effects(
    access: Access, tools: Mapping[str, list[Effect]]
) -> dict[str, list[Effect]]:
    """Per tool, the effects it has that this access does not permit."""
    allowed = permitted(access)
    return {name: [e for e in effects if e not in allowed] for name, effects in tools.items()}


def is_full(access: Access) -> bool:
    """Whether the access permits everything (the default: nothing is narrowed)."""
    return permitted(access) == frozenset(EFFECTS)


@attrs.frozen
class Negotiated:
    """One child's tools after the request's access was applied."""

    kept: dict[str, list[Effect]]
    removed: dict[str, list[Effect]]


def negotiate(
    backend: Backend,
    requested: tuple[str, ...] | None,
    access: Access,
    already_removed: tuple[str, ...] = (),
    answered: Mapping[str, frozenset[Effect]] | None = None,
) -> Negotiated:
    """The child's tools (the requested ones, else the whole catalog) within `access`.

    `already_removed` are tools an earlier narrowing took out of `requested`: they
    are reported as removed again, so a narrowed plan's receipt still says so.
    `answered`: per tool, the effects whose every use the host answers (planning/
    approvals.py `host_answered`): a tool exceeding `access` only by those is kept, as
    the host rejects each use of them.
    """
    answered = answered or {}
    names = requested if requested is not None else default_tools(backend)
    allowed = permitted(access)
    kept: dict[str, list[Effect]] = {}
    removed: dict[str, list[Effect]] = {
        name: sorted(backend.tools.get(name, frozenset())) for name in already_removed
    }
    for name in names:
        effects = sorted(backend.tools.get(name, frozenset()))
        beyond = set(effects) - allowed
        (kept if beyond <= answered.get(name, frozenset()) else removed)[name] = effects
    return Negotiated(kept=kept, removed=removed)


def default_tools(backend: Backend) -> tuple[str, ...]:
    """The tools a child gets when the request names none (the CLI's own default)."""
    defaults: tuple[str, ...] | None = getattr(backend, "default_tools", None)
    return defaults if defaults is not None else tuple(backend.tools)
