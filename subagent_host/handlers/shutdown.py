"""`shutdown`: LSP's request to get ready to exit; answered null (protocol.md §6).

From the answer on, the connection takes only `exit`: a request is refused
-32600 and any other notification is ignored, as LSP 3.17 says (the
dispatcher's, which reads the connection's `Lifecycle`, rpc/lifecycle.py). A
second `shutdown` is a request like any other then, so -32600 too. Nothing is
stopped yet: runs go on and requests already in flight are answered, until
`exit` or the end of input ends the server (protocol.md §6).
"""

from __future__ import annotations

from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.wire import NoParams


def handle(params: NoParams, ctx: HandlerContext) -> None:
    """Answer null and take only `exit` from now on.

    Synchronous on purpose: it is answered inline, so a request read right after
    it, even in the same write or batch, is already refused.
    """
    ctx.lifecycle.shut_down()
