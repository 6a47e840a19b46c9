"""`exit` (a notification): LSP's end of the connection, the same as the end of input
(protocol.md §6).

Nothing after it is read (rpc/connection.py stops there); the server answers
what it had read, stops its background runs as at end of input, and exits with
status 0 when `shutdown` came first, else 1, as LSP 3.17 says
(`Lifecycle.exit_status`, which `app.py` returns).
"""

from __future__ import annotations

from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.wire import NoParams


def handle(params: NoParams, ctx: HandlerContext) -> None:
    """Read no further message: the server ends as at end of input."""
    ctx.lifecycle.exit()
