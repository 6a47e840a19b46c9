"""The control socket's methods: what a local operator needs of this server (protocol.md §10.1).

A connection to the control socket (rpc/control.py) belongs to no session: it reaches
the runs this server holds by their full id, whichever session they are in, because
only the same user can connect. `stop` takes the very path a stdio `stop` takes
(`handlers/stop.stop_here`), so the owning client sees the same events and end; `run/send`,
`run/interrupt`, `run/close` and `run/permit` are the stdio methods themselves, their
run found by `handlers/live_runs.held_run` on a context that reaches any session's. A
permission answered here is answered by `client:terminal`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from subagent_host.errors import RunNotFound
from subagent_host.handlers import ping
from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.live_runs import held_here
from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.handlers.stop import check_grace, stop_here
from subagent_host.handlers.table import METHODS, MethodSpec, bind_methods, by_name
from subagent_host.rpc.dispatch import Method
from subagent_host.rpc.errors import InvalidParams
from subagent_host.rpc.param_problems import ParamProblem
from subagent_host.rpc.wire import PingParams, PingResult, RunSnapshot, StatusParams, StopParams


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
    return run_snapshot(held_here(params.run_id, ctx))


async def handle_stop(params: StopParams, ctx: HandlerContext) -> RunSnapshot:
    """Stop a run this server holds, as a stdio `stop` from its own client would."""
    check_grace(params)
    return await stop_here(held_here(params.run_id, ctx), params, ctx)


CLIENT_NAME: Final = "terminal"
"""Who a control connection is, as a permission answered through it says (`client:terminal`):
the socket is for the same user's local tools, `subagent-host permit` and `watch` first."""
# The stdio methods a control connection answers as they are (their handlers find the run
# through `held_run`, which on this socket's context reaches every session's).
LIVE_METHODS: Final = ("run/close", "run/interrupt", "run/permit", "run/send")


# The methods a control connection answers; the server's own specs' shape (handlers/table.py).
CONTROL_METHODS: Final[Mapping[str, MethodSpec]] = by_name(
    (
        MethodSpec("ping", PingParams, PingResult, handle_ping),
        MethodSpec("status", StatusParams, RunSnapshot, handle_status, raises=(RunNotFound,)),
        MethodSpec("stop", StopParams, RunSnapshot, handle_stop, raises=(RunNotFound,)),
        *(METHODS[name] for name in LIVE_METHODS),
    )
)


def build_control_table(ctx: HandlerContext) -> dict[str, Method]:
    """The control socket's table, over a copy of the server's context that lists only
    these methods (its `ping` then says what this socket answers)."""
    methods = tuple(sorted(CONTROL_METHODS))
    control = attrs.evolve(
        ctx,
        methods=methods,
        notifications=(),
        last_ping=None,
        client_name=CLIENT_NAME,
        any_session=True,
    )
    return bind_methods(CONTROL_METHODS.values(), control)
