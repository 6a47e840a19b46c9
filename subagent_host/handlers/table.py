"""The method table: every JSON-RPC method this server answers, each declared once.

A method is one `MethodSpec`: its name, params type, result type, the domain
errors it may raise, and its handler. The dispatch table (`build_method_table`),
the lists `ping` and `initialize` report, and the OpenRPC document
(`openrpc/builder.py`: params, result, summary, errors) are all read from
`METHODS`; a method missing here is answered -32601. A new method is one spec
here and one handler module (`handlers/<name>.py` with its `handle`).

Only `ping`, `initialize`, LSP's `shutdown` and the notifications' handlers are
imported with the table: every other handler module is imported on its method's
first call (`lazy_handler`), so the first reply (to `initialize` or `ping`, as a rule)
waits for none of what launching, checking or resuming runs needs. That is why
a spec names its result type (a wire type of `rpc/wire/`) rather than reading
it from the handler: tests/handlers/test_table.py checks the two agree.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Final, NamedTuple, Never

from attrs import AttrsInstance
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
    AgentsListResult,
    CloseParams,
    DetachParams,
    InitializedParams,
    InitializeParams,
    InitializeResult,
    InterruptParams,
    InterruptResult,
    NoParams,
    PermitParams,
    PermitResult,
    PingParams,
    PingResult,
    PreflightParams,
    PreflightResult,
    ResumeParams,
    RunSnapshot,
    SendParams,
    SendResult,
    SpawnParams,
    StatusParams,
    StatusResult,
    StopParams,
    WorkDoneProgressCancelParams,
)

# A handler module's `handle(params, ctx)`, async or plain. The table holds handlers of
# every params type, so it names none: `Never` is the params type every one of them takes
# (a handler of `PingParams` is a handler of `Never`). Only dispatch calls one, with the
# params its spec names structured (tests/handlers/test_table.py checks the two agree).
AsyncHandler = Callable[[Never, HandlerContext], Awaitable[object]]
SyncHandler = Callable[[Never, HandlerContext], object]


class MethodSpec(NamedTuple):
    """One JSON-RPC method a client sends, declared once. (A named tuple, not an attrs
    class: it is made with the table, before the first reply, where a tuple costs less.)"""

    name: str
    """The method's name on the wire."""
    params: type[AttrsInstance]
    """The wire type its params are read as."""
    result: object
    """The wire type of its result (`rpc/wire/`); None for one that answers null
    (LSP's `shutdown`) or never answers (a notification)."""
    handler: AsyncHandler | SyncHandler
    """`handle(params, ctx)`: a handler module's own, or `lazy_handler(module)`'s."""
    raises: tuple[type[HostError], ...] = ()
    """The domain errors it may raise besides what any method may answer (invalid
    params, internal error, cancelled): the schema lists their codes as its `errors`."""
    paced: bool = False
    """Its reply may be large (`status {since}`: up to 8 MiB of events): answered in its
    turn, one at a time, once the output drains (rpc/pacing.py)."""
    notification: bool = False
    """A client only ever sends it as a notification: never answered, not in `ping`'s
    list of methods (a request for it is -32601)."""


# What a request to a run's interactive children may raise: -32003 is `RequestRefused`,
# a `LaunchRejected` (the code's class) whose data says why the run's state refused it.
LIVE_RUN_ERRORS: Final = (RunNotFound, AmbiguousRunId, LaunchRejected)


def lazy_handler(module: str) -> AsyncHandler:
    """The async `handle` of `handlers/<module>.py`, imported when first called."""

    async def handle(params: Never, ctx: HandlerContext) -> object:
        return await _handler(module)(params, ctx)

    _LAZY_MODULES[handle] = module
    return handle


# Each handler made by `lazy_handler`, with the module whose `handle` it calls.
_LAZY_MODULES: dict[AsyncHandler | SyncHandler, str] = {}


def implementation(handler: AsyncHandler | SyncHandler) -> AsyncHandler | SyncHandler:
    """The function that answers: for a `lazy_handler`, its module's `handle`, imported
    now (the schema reads its summary; a test its annotations)."""
    module = _LAZY_MODULES.get(handler)
    return handler if module is None else _handler(module)


@functools.cache
def _handler(module: str) -> AsyncHandler:
    handler: AsyncHandler = importlib.import_module(f"subagent_host.handlers.{module}").handle
    return handler


def by_name(specs: Iterable[MethodSpec]) -> Mapping[str, MethodSpec]:
    """The specs keyed by name; a name declared twice is a mistake caught at import."""
    table: dict[str, MethodSpec] = {}
    for spec in specs:
        assert spec.name not in table, spec.name
        table[spec.name] = spec
    return table


METHODS: Mapping[str, MethodSpec] = by_name(
    (
        MethodSpec("agents/list", AgentsListParams, AgentsListResult, lazy_handler("agents_list")),
        MethodSpec("initialize", InitializeParams, InitializeResult, initialize.handle),
        MethodSpec("ping", PingParams, PingResult, ping.handle),
        MethodSpec(
            "preflight",
            PreflightParams,
            PreflightResult,
            lazy_handler("preflight"),
            # BackendUnavailable: a cluster executor that cannot reach its cluster (§8.8).
            raises=(RunNotFound, AmbiguousRunId, BackendUnavailable),
        ),
        MethodSpec(
            "resume",
            ResumeParams,
            RunSnapshot,
            lazy_handler("resume"),
            raises=(ResumeDenied, CapacityExceeded, BackendUnavailable),
        ),
        MethodSpec(
            "run/close",
            CloseParams,
            RunSnapshot,
            lazy_handler("close"),
            raises=LIVE_RUN_ERRORS,
        ),
        MethodSpec(
            "run/interrupt",
            InterruptParams,
            InterruptResult,
            lazy_handler("interrupt"),
            raises=LIVE_RUN_ERRORS,
        ),
        MethodSpec(
            "run/permit",
            PermitParams,
            PermitResult,
            lazy_handler("permit"),
            raises=LIVE_RUN_ERRORS,
        ),
        MethodSpec(
            "run/send",
            SendParams,
            SendResult,
            lazy_handler("send"),
            raises=LIVE_RUN_ERRORS,
        ),
        MethodSpec(SHUTDOWN, NoParams, None, shutdown.handle),
        MethodSpec(
            "spawn",
            SpawnParams,
            RunSnapshot,
            lazy_handler("spawn"),
            raises=(BackendUnavailable, LaunchRejected, CapacityExceeded),
        ),
        MethodSpec(
            "status",
            StatusParams,
            StatusResult,
            lazy_handler("status"),
            raises=(RunNotFound, AmbiguousRunId),
            paced=True,
        ),
        MethodSpec(
            "stop",
            StopParams,
            RunSnapshot,
            lazy_handler("stop"),
            raises=(RunNotFound, AmbiguousRunId),
        ),
        # Only ever notifications: `$/cancelRequest` is dispatch's own, not a spec.
        MethodSpec(EXIT, NoParams, None, exit_.handle, notification=True),
        MethodSpec("initialized", InitializedParams, None, initialized.handle, notification=True),
        MethodSpec("run/detach", DetachParams, None, detach.handle, notification=True),
        MethodSpec(
            "window/workDoneProgress/cancel",
            WorkDoneProgressCancelParams,
            None,
            progress_cancel.handle,
            notification=True,
        ),
    )
)


def build_method_table(ctx: HandlerContext) -> dict[str, Method]:
    """Bind every handler to this connection's context; record the lists `ping` and
    `initialize` report (`$/cancelRequest` is dispatch's own, not a table entry)."""
    ctx.methods = tuple(sorted(name for name, spec in METHODS.items() if not spec.notification))
    notifications = (name for name, spec in METHODS.items() if spec.notification)
    ctx.notifications = tuple(sorted({CANCEL_REQUEST, *notifications}))
    return bind_methods(METHODS.values(), ctx)


def bind_methods(specs: Iterable[MethodSpec], ctx: HandlerContext) -> dict[str, Method]:
    """The dispatch table of `specs`, each handler bound to `ctx`."""
    return {
        spec.name: Method(
            spec.params,
            bind(spec.handler, ctx),
            notification=spec.notification,
            paced=spec.paced,
        )
        for spec in specs
    }


def bind(handler: AsyncHandler | SyncHandler, ctx: HandlerContext) -> Callable[[Never], object]:
    """Close over the context, keeping the handler async or sync as it was written."""
    if inspect.iscoroutinefunction(handler):

        async def call_async(params: Never) -> object:
            return await handler(params, ctx)

        return call_async

    def call(params: Never) -> object:
        return handler(params, ctx)

    return call
