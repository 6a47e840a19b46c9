"""The control socket's methods: what a local operator needs of this server (protocol.md §10.1).

A connection to the control socket (rpc/control.py) belongs to no session: it reaches
the runs this server holds by their full id, whichever session they are in, because
only the same user can connect. `stop` takes the very path a stdio `stop` takes
(`handlers/stop.stop_here`), so the owning client sees the same events and end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from subagent_host.errors import RunNotFound
from subagent_host.handlers import ping
from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.handlers.stop import check_grace, stop_here
from subagent_host.handlers.table import AsyncHandler, SyncHandler, bind
from subagent_host.rpc.dispatch import Method
from subagent_host.rpc.errors import InvalidParams
from subagent_host.rpc.param_problems import ParamProblem
from subagent_host.rpc.wire import PingParams, PingResult, RunSnapshot, StatusParams, StopParams
from subagent_host.runs.state import Run


def handle_ping(params: PingParams, ctx: HandlerContext) -> PingResult:
    """`ping` as on stdio, but a control connection binds to no session."""
    if params.session_id is not None:
        raise InvalidParams(
            [ParamProblem("sessionId", "a control connection is bound to no session")]
        )
    return ping.handle(params, ctx)


async def handle_status(params: StatusParams, ctx: HandlerContext) -> RunSnapshot:
    """The snapshot of a run this server holds (a full `runId` is needed)."""
    if params.run_id is None or params.since is not None:
        raise InvalidParams([ParamProblem("runId", "the control socket needs a runId, no since")])
    return run_snapshot(held_run(params.run_id, ctx))


async def handle_stop(params: StopParams, ctx: HandlerContext) -> RunSnapshot:
    """Stop a run this server holds, as a stdio `stop` from its own client would."""
    check_grace(params)
    return await stop_here(held_run(params.run_id, ctx), params, ctx)


def held_run(run_id: str, ctx: HandlerContext) -> Run:
    run = ctx.runs.get(run_id)
    if run is None:
        raise RunNotFound(
            f"run {run_id} is not held by this server",
            data={"runId": run_id, "reason": "not-held-here"},
        )
    return run


ENTRIES: Mapping[str, tuple[type[Any], AsyncHandler | SyncHandler]] = {
    "ping": (PingParams, handle_ping),
    "status": (StatusParams, handle_status),
    "stop": (StopParams, handle_stop),
}


def build_control_table(ctx: HandlerContext) -> dict[str, Method]:
    """The control socket's table, over a copy of the server's context that lists only
    these methods (its `ping` then says what this socket answers)."""
    control = attrs.evolve(ctx, methods=tuple(sorted(ENTRIES)), notifications=(), last_ping=None)
    return {
        name: Method(params, bind(handler, control)) for name, (params, handler) in ENTRIES.items()
    }
