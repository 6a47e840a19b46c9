"""Answering a run's permissions from a callback: what `Host.answer_permissions` decides
with, and how a decision names the option to send (protocol.md §23.4).

A child with `approvals: "client"` asks before a tool runs; each ask is a `permission`
event (stage `asked`) and an entry of the run's `pendingPermissions`, both read here as
one type, `PendingPermission` (an event's made by `PermissionEvent.pending`). The
caller's `decide` answers each with an option it offers, the kind of one (the first
offered of that kind), the option's id, or None to leave it unanswered (another client
may answer it; unanswered, it times out rejected).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias

from subagent_host.values.choices import OptionKind
from subagent_host.values.interaction import PendingPermission, PermissionOption

Choice: TypeAlias = PermissionOption | OptionKind | str | None
"""What `decide` returns: an option (or its id, a `str`), the kind of one, or None."""

Decide: TypeAlias = Callable[[PendingPermission], Choice | Awaitable[Choice]]
"""Called with each permission asked; a plain function or a coroutine function."""


def option_id_of(permission: PendingPermission, choice: Choice) -> str | None:
    """The option id `choice` names for `permission` (None: leave it unanswered).

    ValueError: a kind it offers no option of. An id is sent as it is: one it does not
    offer is the server's to refuse (`InvalidParams`).
    """
    if choice is None:
        return None
    if isinstance(choice, PermissionOption):
        return choice.option_id
    if isinstance(choice, OptionKind):
        for option in permission.options:
            if option.kind is choice:
                return option.option_id
        offered = ", ".join(str(option.kind) for option in permission.options)
        raise ValueError(f"permission {permission.permission_id} offers no {choice} ({offered})")
    return choice


async def decided(decide: Decide, permission: PendingPermission) -> Choice:
    """`decide`'s answer for `permission`, awaited when it is a coroutine's."""
    choice = decide(permission)
    if isinstance(choice, Awaitable):
        return await choice
    return choice
