"""What a client sees of an interactive child (protocol.md §23): its turn, and the
permissions it waits on.

Plain values, below the run state machine that keeps them and the wire that sends
them (a `ChildSnapshot`'s `turn`, a run's `pendingPermissions`, the `permission`
event's options). Imports nothing of ours but the values.
"""

from __future__ import annotations

import attrs

from subagent_host.values.choices import OptionKind, ToolKind, TurnState


@attrs.frozen
class TurnInfo:
    """An interactive child's turns: how many began, and whether one runs now."""

    count: int
    """Turns begun so far (the first prompt's is the first; 0 when it had none)."""
    state: TurnState
    """`running` while its model works on a message, `waiting` for the next one."""


@attrs.frozen
class PermissionOption:
    """One answer a permission offers (ACP's `PermissionOption`)."""

    option_id: str
    """What `run/permit` names as its `optionId`."""
    name: str
    """The answer in words, as the CLI offers it."""
    kind: OptionKind
    """`allow-once`, `allow-always`, `reject-once` or `reject-always`."""


@attrs.frozen(kw_only=True)
class PendingPermission:
    """A tool use a child waits to have answered (`approvals: "client"`)."""

    index: int
    """The child that asks."""
    permission_id: str
    """What `run/permit` names."""
    tool_id: str | None = None
    """The CLI's own id of the tool call, when it gave one (its `tool` events carry it)."""
    name: str
    """The CLI's own name of the tool."""
    kind: ToolKind
    """What the tool does, in ACP's tool kinds."""
    summary: str
    """One line of its input (a command, a path); never file contents."""
    options: tuple[PermissionOption, ...]
    """The answers it offers."""
