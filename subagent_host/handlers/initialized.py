"""`initialized` (a notification): LSP's second step of the handshake, taken in silence
(protocol.md §5.1).

An LSP client (vscode-languageclient, for one) sends it once `initialize` is
answered. This server needs no second step: it is accepted and does nothing,
not even a log line.
"""

from __future__ import annotations

from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.wire import InitializedParams


def handle(params: InitializedParams, ctx: HandlerContext) -> None:
    """Nothing to do: the handshake is complete with `initialize`'s answer."""
