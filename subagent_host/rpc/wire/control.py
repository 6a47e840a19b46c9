"""Acting on a running run: `stop`, `run/detach` and `window/workDoneProgress/cancel`."""

from __future__ import annotations

import attrs

from subagent_host.rpc.wire.basics import MsgToken


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
