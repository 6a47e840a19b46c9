"""The cases, one module per area of protocol.md; importing this registers them all."""

from subagent_host.conformance.cases import (  # noqa: F401
    agents,
    batches,
    cancellation,
    framing,
    handshake,
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
