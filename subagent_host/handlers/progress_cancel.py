"""`window/workDoneProgress/cancel {token}` (a notification): stop the run behind a progress.

LSP's way to cancel work reported with `$/progress`: the run that reports under
the token (its spawn's `workDoneToken`) is stopped as `stop` would stop it —
SIGTERM, the grace, SIGKILL to whatever is left — and ends `cancelled`. Nothing
is answered; a token no live run of this connection's session reports under
(unknown, another session's, or of a run that has already ended) is ignored (a
debug line in the log).

Synchronous on purpose: the token and the session are looked at as the
notification arrives, in order with the messages around it (a `ping` that binds
another session right after it does not change whose run it names). The stop
itself goes on in the run's own task.
"""

from __future__ import annotations

import logging
from typing import Final

from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.wire import WorkDoneProgressCancelParams

logger = logging.getLogger(__name__)

REASON: Final = "cancelled by the client (window/workDoneProgress/cancel)"


def handle(params: WorkDoneProgressCancelParams, ctx: HandlerContext) -> None:
    stopped = 0
    for run_id in ctx.progress.runs_with_token(params.token):
        run = ctx.orchestrator.get(run_id)
        if run is not None and run.session_id == ctx.session_id and not run.is_terminal:
            ctx.orchestrator.begin_stop(run, grace_ms=None, reason=REASON)
            stopped += 1
    if not stopped:
        logger.debug("progress cancel: no live run of this session under %r", params.token)
