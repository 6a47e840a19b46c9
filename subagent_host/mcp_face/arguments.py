"""The arguments of the tools that no protocol method takes as they are.

`spawn` takes a launch request (the fields of the protocol's `spawn`, planning's
`LaunchRequest`) plus `waitSeconds`; `wait` takes a run and how long to wait. The
other tools take a method's params type as it is (`tools.py`). Their JSON Schemas are
generated from these types by the OpenRPC generator (`openrpc/schemas.py`), field
docstrings included, and arguments are read with the wire's own strict converter.
"""

from __future__ import annotations

from typing import Final

import attrs

from subagent_host.planning.request import LaunchRequest

MAX_WAIT_SECONDS: Final = 50
"""The longest a tool call waits for a run: under the ~60 s after which MCP clients
(Claude Code among them) give up on a tool call; `wait` again to wait longer."""
DEFAULT_WAIT_SECONDS: Final = 30
"""`wait` without `waitSeconds`: well within the clients' tool-call timeouts."""


@attrs.frozen
class SpawnArguments(LaunchRequest):
    """Start a run: one child (`prompt`, `agent` or `command`), `tasks` in parallel, a `chain`,
    or a `workflow`. It runs in the background: the answer names it at once (`runId`), and
    `wait`, `status` and `stop` take that id."""

    wait_seconds: int | None = None
    """Wait up to this many seconds (0..50) for the run to end before answering; absent or 0:
    answer at once. A run still going when the time is up goes on: `wait` for it."""


@attrs.frozen
class WaitArguments:
    """Wait for a run to end, up to `waitSeconds`; its snapshot either way."""

    run_id: str
    """The run: its id, or a unique prefix of at least 8 characters."""
    wait_seconds: int | None = None
    """How long to wait at most, 0..50 seconds (default 30); a run still going then goes on."""
