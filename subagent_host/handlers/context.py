"""What every handler is given: the server's configuration and this connection's state."""

from __future__ import annotations

import attrs

from subagent_host.config import ServerConfig


@attrs.define
class Context:
    """Per-connection state shared by the handlers (one client per process, CONTRACT §1)."""

    config: ServerConfig
    session_id: str
    """The session this connection is bound to (`ping {sessionId}` or `--session` sets it)."""
    methods: tuple[str, ...] = ()
    """The methods this server answers, as `ping` lists them."""
