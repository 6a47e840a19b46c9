"""`ping`: liveness, identity, session binding and limits (CONTRACT §2)."""

from __future__ import annotations

import functools
from typing import Final

from subagent_host import PROTOCOL_VERSION, SERVER_NAME, __version__
from subagent_host.config import (
    ServerConfig,
)
from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.wire import (
    Admission,
    Limits,
    PingParams,
    PingResult,
    ServerInfo,
)


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
        admission=Admission(require_preflight=ctx.config.require_preflight),
    )


SERVER_INFO: Final = ServerInfo(name=SERVER_NAME, version=__version__)


@functools.cache
def limits_of(config: ServerConfig) -> Limits:
    """The limits a client should plan with (CONTRACT §6), from this server's configuration."""
    return Limits(
        max_concurrency=config.max_concurrency,
        max_parallel=config.max_parallel,
        grace_ms=config.grace_ms,
        default_timeout_ms=config.default_timeout_ms,
        default_stall_timeout_ms=config.default_stall_timeout_ms,
        output_cap_bytes=config.output_cap_bytes,
        output_cap_lines=config.output_cap_lines,
        previous_cap_bytes=config.previous_cap_bytes,
        max_message_bytes=config.max_message_bytes,
    )
