"""What this server is and offers: the one builder behind `ping` and `initialize`.

`ping` answers with a few of these parts (it stays cheap: answered inline, it
probes nothing); `initialize` with all of them. Both call the functions here, so
the two can never describe the server differently (protocol.md §5, §5.1).
"""

from __future__ import annotations

import functools
from typing import Final

from subagent_host import SERVER_NAME, __version__
from subagent_host.config import ServerConfig
from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.wire import (
    Admission,
    Features,
    Limits,
    NotificationCapabilities,
    ServerCapabilities,
    ServerInfo,
)
from subagent_host.values.copying import shared

SERVER_INFO: Final = ServerInfo(name=SERVER_NAME, version=__version__)

# What the server sends the client (handlers/progress.py sends them).
SENT_NOTIFICATIONS: Final = ("$/progress", "run/event")


@functools.cache
def limits_of(config: ServerConfig) -> Limits:
    """The limits a client should plan with (protocol.md §5), from this server's configuration."""
    return shared(
        Limits,
        config,
        default_timeout_ms=config.default_timeout_ms,
        default_stall_timeout_ms=config.default_stall_timeout_ms,
    )


@functools.cache
def admission_of(require_preflight: bool, require_egress_consent: bool) -> Admission:
    return Admission(
        require_preflight=require_preflight, require_egress_consent=require_egress_consent
    )


def features_of(ctx: HandlerContext) -> Features:
    """What this server does, as this connection finds it."""
    return Features(
        preflight=True,
        resume=ctx.resume_enabled and ctx.store.durable,
        workflows=True,
        agents=True,
        work_done_progress=True,
        batches=True,
        process_tracking=ctx.process_tracking(),
        persistence=ctx.store.persistence,
        require_preflight=ctx.config.require_preflight,
        require_egress_consent=ctx.config.require_egress_consent,
        framing=ctx.framing(),
    )


def capabilities_of(ctx: HandlerContext) -> ServerCapabilities:
    """Everything `initialize` reports beside the server's identity and the session."""
    return ServerCapabilities(
        methods=ctx.methods,
        notifications=NotificationCapabilities(sent=SENT_NOTIFICATIONS, accepted=ctx.notifications),
        backends=ctx.toolchain.describe(),
        limits=limits_of(ctx.config),
        features=features_of(ctx),
    )
