"""The method table: every JSON-RPC method this server answers, spelled out.

A method missing here is answered -32601. Only `ping`, `initialize`, LSP's
`shutdown` and the notifications' handlers are imported with the table: every other handler module
is imported on its method's first call, so the first reply (to `initialize` or
`ping`, as a rule) waits for none of what launching, checking or resuming runs
needs.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from lsprotocol.types import CANCEL_REQUEST

from subagent_host.errors import (
    AmbiguousRunId,
    BackendUnavailable,
    CapacityExceeded,
    HostError,
    LaunchRejected,
    ResumeDenied,
    RunNotFound,
)
from subagent_host.handlers import (
    detach,
    initialize,
    initialized,
    ping,
    progress_cancel,
    shutdown,
)
from subagent_host.handlers import exit as exit_
from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.dispatch import Method
from subagent_host.rpc.lifecycle import EXIT, SHUTDOWN
from subagent_host.rpc.wire import (
    AgentsListParams,
    DetachParams,
    InitializedParams,
    InitializeParams,
    NoParams,
    PingParams,
    PreflightParams,
    ResumeParams,
    SpawnParams,
    StatusParams,
    StopParams,
    WorkDoneProgressCancelParams,
)

AsyncHandler = Callable[[Any, HandlerContext], Awaitable[Any]]
SyncHandler = Callable[[Any, HandlerContext], Any]


def later(module: str) -> AsyncHandler:
    """The async `handle` of `handlers/<module>.py`, imported when first called."""

    async def handle(params: Any, ctx: HandlerContext) -> Any:
        return await _handler(module)(params, ctx)

    _LATER[handle] = module
    return handle


# Each handler made by `later`, with the module whose `handle` it calls.
_LATER: dict[AsyncHandler, str] = {}


def implementation(handler: AsyncHandler | SyncHandler) -> AsyncHandler | SyncHandler:
    """The function that answers: for a `later` handler, its module's `handle`, imported
    now (the schema reads its result type)."""
    module = _LATER.get(handler)
    return handler if module is None else _handler(module)


@functools.cache
def _handler(module: str) -> AsyncHandler:
    handler: AsyncHandler = importlib.import_module(f"subagent_host.handlers.{module}").handle
    return handler


ENTRIES: Mapping[str, tuple[type[Any], AsyncHandler | SyncHandler]] = {
    "agents/list": (AgentsListParams, later("agents_list")),
    "initialize": (InitializeParams, initialize.handle),
    "ping": (PingParams, ping.handle),
    "preflight": (PreflightParams, later("preflight")),
    "resume": (ResumeParams, later("resume")),
    SHUTDOWN: (NoParams, shutdown.handle),
    "spawn": (SpawnParams, later("spawn")),
    "status": (StatusParams, later("status")),
    "stop": (StopParams, later("stop")),
}
# The domain errors (`subagent_host.errors`) a method may raise besides the ones any
# method may answer (invalid params, internal error, cancelled): `rpc/errors.py` maps
# them to codes, and the schema lists those codes as the method's `errors`.
RAISES: Mapping[str, tuple[type[HostError], ...]] = {
    # BackendUnavailable: a cluster executor that cannot reach its cluster (§8.8).
    "preflight": (RunNotFound, AmbiguousRunId, BackendUnavailable),
    "resume": (ResumeDenied, CapacityExceeded, BackendUnavailable),
    "spawn": (BackendUnavailable, LaunchRejected, CapacityExceeded),
    "status": (RunNotFound, AmbiguousRunId),
    "stop": (RunNotFound, AmbiguousRunId),
}
# Methods whose reply may be large (`status {since}`: up to 8 MiB of events): each is
# answered in its turn, one at a time, once the output drains (rpc/pacing.py).
PACED: frozenset[str] = frozenset({"status"})
# Methods a client only ever sends as notifications (never answered; not in `ping`'s list).
NOTIFICATIONS: Mapping[str, tuple[type[Any], AsyncHandler | SyncHandler]] = {
    EXIT: (NoParams, exit_.handle),
    "initialized": (InitializedParams, initialized.handle),
    "run/detach": (DetachParams, detach.handle),
    "window/workDoneProgress/cancel": (WorkDoneProgressCancelParams, progress_cancel.handle),
}


def build_method_table(ctx: HandlerContext) -> dict[str, Method]:
    """Bind every handler to this connection's context; record the lists `ping` and
    `initialize` report (`$/cancelRequest` is dispatch's own, not a table entry)."""
    ctx.methods = tuple(sorted(ENTRIES))
    ctx.notifications = tuple(sorted({CANCEL_REQUEST, *NOTIFICATIONS}))
    table = {
        name: Method(params_type, bind(handler, ctx), paced=name in PACED)
        for name, (params_type, handler) in ENTRIES.items()
    }
    for name, (params_type, handler) in NOTIFICATIONS.items():
        table[name] = Method(params_type, bind(handler, ctx), notification=True)
    return table


def bind(handler: AsyncHandler | SyncHandler, ctx: HandlerContext) -> Callable[[Any], Any]:
    """Close over the context, keeping the handler async or sync as it was written."""
    if inspect.iscoroutinefunction(handler):

        async def call_async(params: Any) -> Any:
            return await handler(params, ctx)

        return call_async

    def call(params: Any) -> Any:
        return handler(params, ctx)

    return call
