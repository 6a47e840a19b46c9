"""Acting on a running run: `stop`, `run/detach`, `window/workDoneProgress/cancel`, and
talking to its interactive children: `run/send`, `run/interrupt`, `run/close`, `run/permit`."""

from __future__ import annotations

import attrs

from subagent_host.rpc.wire.basics import MsgToken
from subagent_host.values.choices import Delivery, DeliveryState, OptionKind
from subagent_host.values.interaction import TurnInfo


@attrs.frozen
class StopParams:
    run_id: str
    """The run: its id, or a unique prefix of at least 8 characters."""
    grace_ms: int | None = None
    """Milliseconds between SIGTERM and SIGKILL, 0..86400000; absent: the server's `--grace-ms`."""
    reason: str | None = None
    """The cancelled run's `reason`; absent: "stopped by the client"."""


@attrs.frozen
class DetachParams:
    run_id: str
    """The run's full id: its waiting `task`-mode requests are answered now."""


@attrs.frozen
class WorkDoneProgressCancelParams:
    token: MsgToken
    """The `workDoneToken` of a spawn: the run reporting progress under it is stopped."""


@attrs.frozen
class SendParams:
    run_id: str
    """The run: its id, or a unique prefix of at least 8 characters."""
    text: str
    """The message: 1 byte to 64 KiB of UTF-8."""
    index: int | None = None
    """The child; absent: the run's one interactive child (a run of several names one)."""
    delivery: Delivery | None = None
    """`queue` (absent): when the current turn ends; `steer`: into the current turn where
    the child's CLI can take it there, else queued (the reply says which)."""


@attrs.frozen
class SendResult:
    message_id: str
    """The message's id: its `input` events carry it."""
    state: DeliveryState
    """`delivered` (written to the child) or `queued` (until its turn ends)."""


@attrs.frozen
class InterruptParams:
    run_id: str
    """The run: its id, or a unique prefix of at least 8 characters."""
    index: int | None = None
    """The child; absent: the run's one interactive child."""


@attrs.frozen
class InterruptResult:
    interrupted: bool
    """True: a turn was running and is being ended (its `turn` `end` event follows, with
    `stopReason: "interrupted"`); false: none was running, nothing was done."""
    turn: TurnInfo
    """The child's turns as the interrupt found them."""


@attrs.frozen
class CloseParams:
    run_id: str
    """The run: its id, or a unique prefix of at least 8 characters."""
    index: int | None = None
    """The child; absent: every interactive child of the run."""


@attrs.frozen
class PermitParams:
    run_id: str
    """The run: its id, or a unique prefix of at least 8 characters."""
    permission_id: str
    """The pending permission (its `permission` event's, or `pendingPermissions`)."""
    option_id: str
    """One of the options it offers."""


@attrs.frozen
class PermitResult:
    permission_id: str
    """The permission answered."""
    option_id: str
    """The answer given."""
    kind: OptionKind
    """What the answer does: `allow-once`, `allow-always`, `reject-once` or `reject-always`."""
