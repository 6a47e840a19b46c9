"""`initialize`: the optional handshake, the server's full report (protocol.md §5.1)."""

from __future__ import annotations

import logging

from subagent_host import PROTOCOL_VERSION
from subagent_host.handlers.capabilities import SERVER_INFO, capabilities_of
from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.errors import InvalidParams
from subagent_host.rpc.param_problems import ParamProblem
from subagent_host.rpc.wire import TRACE_VALUES, InitializeParams, InitializeResult

logger = logging.getLogger(__name__)


def handle(params: InitializeParams, ctx: HandlerContext) -> InitializeResult:
    """Report what the server speaks, is and offers; change nothing.

    Optional and repeatable: every method works without it, and each call answers
    afresh. A client asking for another protocol version is not refused: the result
    names the one this server speaks and the client decides. LSP's own fields
    (`processId`, `rootUri`, `workspaceFolders`, `trace`, ...) are checked, and only
    `processId` is used (logged). Synchronous: it waits for nothing (backend versions
    are reported as probed so far, like `ping`).
    """
    if params.trace is not None and params.trace not in TRACE_VALUES:
        raise InvalidParams([ParamProblem("trace", f"must be one of {', '.join(TRACE_VALUES)}")])
    if params.protocol_version is not None and params.protocol_version != PROTOCOL_VERSION:
        logger.info(
            "client asked for protocol %r; this server speaks %r",
            params.protocol_version,
            PROTOCOL_VERSION,
        )
    if params.client_info is not None or params.process_id is not None:
        logger.info("client: %s", _client_words(params))
    if params.client_info is not None:
        ctx.client_name = params.client_info.name
    return InitializeResult(
        protocol_version=PROTOCOL_VERSION,
        server_info=SERVER_INFO,
        session_id=ctx.session_id,
        capabilities=capabilities_of(ctx),
    )


def _client_words(params: InitializeParams) -> str:
    """`Visual Studio Code 1.95.0 (process 1234)`: who the client says it is."""
    info = params.client_info
    words = [info.name, *([info.version] if info.version else [])] if info else ["unnamed"]
    if params.process_id is not None:
        words.append(f"(process {params.process_id})")
    return " ".join(words)
