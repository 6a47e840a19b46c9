"""`run/detach {runId}` (a notification): hand a waiting `task`-mode request to the background.

Every `task`-mode `spawn` or `resume` of the run still waiting for its end is
answered now, with the run's current snapshot (a normal result), and the run
goes on: the client follows it with `status` and `run/event` as for any
background run. Nothing is answered for the notification itself; a run that is
unknown, terminal or another session's is ignored (a debug line in the log).
"""

from __future__ import annotations

import logging

from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.wire import DetachParams

logger = logging.getLogger(__name__)


def handle(params: DetachParams, ctx: HandlerContext) -> None:
    run = ctx.orchestrator.get(params.run_id)
    if run is None or run.session_id != ctx.session_id:
        logger.debug(
            "run/detach: no run %s of this session here",
            params.run_id,
            extra={"runId": params.run_id},
        )
        return
    if not ctx.orchestrator.detach(run):
        logger.debug(
            "run/detach: run %s has already ended", params.run_id, extra={"runId": params.run_id}
        )
