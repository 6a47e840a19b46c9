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
    rather than through a task (see bench/ping.py). While nothing it reports has
    changed it answers the very same (frozen) object, which dispatch then sends
    without encoding it again.
    """
    if params.session_id is not None:
        ctx.session_id = params.session_id
    parts = (
        ctx.session_id,
        ctx.methods,
        ctx.toolchain.describe(),
        limits_of(ctx.config),
        ctx.process_tracking(),
        ctx.store.persistence,
        admission_of(ctx.config.require_preflight, ctx.config.require_egress_consent),
    )
    last = ctx.last_ping
    if last is not None and last[0] == parts:
        return last[1]
    session_id, methods, backends, limits, process_tracking, persistence, admission = parts
    result = PingResult(
        pong=True,
        server=SERVER_INFO,
        protocol_version=PROTOCOL_VERSION,
        session_id=session_id,
        methods=methods,
        backends=backends,
        limits=limits,
        process_tracking=process_tracking,
        persistence=persistence,
        admission=admission,
    )
    ctx.last_ping = (parts, result)
    return result
