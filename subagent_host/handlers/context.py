"""What every handler is given: the server's configuration and this connection's state."""

from __future__ import annotations

import attrs

from subagent_host.config import ServerConfig
from subagent_host.handlers.progress import EventPublisher
from subagent_host.runs.catalog import RunCatalog
from subagent_host.runs.manager import RunManager


@attrs.define
class Context:
    """Per-connection state shared by the handlers (one client per process, CONTRACT §1)."""

    config: ServerConfig
    session_id: str
    """The session this connection is bound to (`ping {sessionId}` or `--session` sets it)."""
    runs: RunManager
    catalog: RunCatalog
    """Runs wherever they are: live in memory or recorded on disk."""
    progress: EventPublisher
    methods: tuple[str, ...] = ()
    """The methods this server answers, as `ping` lists them."""
    backends: frozenset[str] = frozenset()
    """The backends that can run here."""
