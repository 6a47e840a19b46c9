"""`ping`: liveness, identity, session binding and limits (protocol.md §5).

The cheap part of what `initialize` reports, built by the same functions
(handlers/capabilities.py).
"""

from __future__ import annotations

from subagent_host import PROTOCOL_VERSION
from subagent_host.handlers.capabilities import SERVER_INFO, admission_of, limits_of
from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.wire import PingParams, PingResult


def handle(params: PingParams, ctx: HandlerContext) -> PingResult:
    """Answer `pong`; with `sessionId`, bind this connection to that session first.

    Synchronous on purpose: ping waits for nothing, so it is answered inline
    rather than through a task (see bench/ping.py).
    """
    if params.session_id is not None:
        ctx.session_id = params.session_id
    return PingResult(
        pong=True,
        server=SERVER_INFO,
        protocol_version=PROTOCOL_VERSION,
        session_id=ctx.session_id,
        methods=ctx.methods,
        backends=ctx.toolchain.describe(),
        limits=limits_of(ctx.config),
        process_tracking=ctx.process_tracking,
        persistence=ctx.store.persistence,
        admission=admission_of(ctx.config.require_preflight),
    )
