"""The cases, one module per area of protocol.md; importing this registers them all."""

from __future__ import annotations

from subagent_host.conformance.cases import (  # noqa: F401
    acp_agents,
    agents,
    batches,
    cancellation,
    framing,
    handshake,
    interactive,
    jsonrpc,
    params,
    ping,
    preflight,
    resume,
    runs,
    status,
    stop,
    workflows,
)
from subagent_host.conformance.registry import CASES, Case


def all_cases() -> list[Case]:
    """Every case: each module above registered its own as it was imported (the registry
    imports none of them, so a case module may import the registry)."""
    return CASES
