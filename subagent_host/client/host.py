"""`Host`: a typed asyncio client of one subagent-host server (protocol.md).

It speaks the protocol with the server's own wire types (`rpc/wire/`,
`values/facts.py`) and converter: params are built as those types from
snake_case keywords and written camelCase; results are read back into them.
Below it, `Connection` frames and matches replies; beside it, `EventRouter`
keeps the `run/event`s that arrive before anyone asks for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Generic, ParamSpec, TypedDict, TypeVar, Unpack, cast, overload

from subagent_host.client.connection import (
    MAX_MESSAGE_BYTES,
    ByteReader,
    ByteWriter,
    Connection,
    MessageObserver,
)
from subagent_host.client.errors import HostConnectionError, RequestRefused
from subagent_host.client.events import EventRouter
from subagent_host.client.params import ParamsWriter
from subagent_host.client.permissions import Decide, decided, option_id_of
from subagent_host.rpc.wire import (
    AgentsListParams,
    AgentsListResult,
    CloseParams,
    DetachParams,
    EventWire,
    InitializeParams,
    InitializeResult,
    InterruptParams,
    InterruptResult,
    PermitParams,
    PermitResult,
    PingParams,
    PingResult,
    PreflightParams,
    PreflightResult,
    ResumeParams,
    RunList,
    RunSnapshot,
    SendParams,
    SendResult,
    SpawnParams,
    StatusParams,
    StopParams,
    make_converter,
)
from subagent_host.server_process import StreamTarget, server_command, start_server_process
from subagent_host.values import TERMINAL, Framing
from subagent_host.values.choices import Delivery, PermissionStage
from subagent_host.values.events import PermissionEvent, StatusEvent
from subagent_host.values.interaction import PendingPermission

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

# How long `aclose` waits for a server it started to exit once its input is closed:
# the server first stops its background runs (SIGTERM, `--grace-ms` of 5 s by
# default, SIGKILL) and answers what it has read (protocol.md §6).
EXIT_WAIT_S: Final = 30.0
# Then SIGTERM: requests still running are cancelled and their runs stopped the same way.
TERMINATE_WAIT_S: Final = 15.0
# Then SIGKILL, which cannot be ignored; reaping it takes no time.
KILL_WAIT_S: Final = 5.0
# What `answer_permissions` takes in its stride: a permission answered meanwhile (by
# another client, its timeout, its child's end, or withdrawn by the CLI).
NOT_PENDING: Final = "not-pending"
# A server on streams of the caller's answers what it has read once its input ends,
# and the events of the runs it stops: read for this long, so that it is not left
# blocked on a full pipe, then stop reading.
DRAIN_WAIT_S: Final = EXIT_WAIT_S


class ConnectOptions(TypedDict, total=False):
    """What `Host.connect` takes beside the streams: `Host`'s own keyword arguments."""

    framing: Framing | str
    on_message: MessageObserver | None
    max_message_bytes: int


"""Where a started server's stderr goes: None (ours), `asyncio.subprocess.DEVNULL`, or a
file. Not `PIPE`: nothing would read it, and a full pipe would stall the server."""


class Call(Generic[P, R]):
    """A protocol method as an attribute of `Host`.

    `host.<name>(**fields)` takes the fields of the method's params type as keywords
    (snake_case, e.g. `timeout_ms`), builds that type (an unknown keyword is a
    `TypeError` at once, before anything is sent) and returns a coroutine of the
    method's result type. Sequences are tuples in the types; lists are sent alike.
    """

    def __init__(
        self, method: str, params: Callable[P, object], result: type[R], summary: str
    ) -> None:
        self.method = method
        self.params = params
        self.result = result
        name = getattr(params, "__name__", repr(params))
        self.__doc__ = (
            f"`{method}`: {summary}\n\n"
            f"Keywords: the fields of `{name}`; result: `{result.__name__}`."
        )

    @overload
    def __get__(self, host: None, owner: type[Host]) -> Call[P, R]: ...

    @overload
    def __get__(self, host: Host, owner: type[Host]) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(
        self, host: Host | None, owner: type[Host]
    ) -> Call[P, R] | Callable[P, Coroutine[Any, Any, R]]:
        if host is None:
            return self

        def call(*args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
            return host.call(self.method, self.params(*args, **kwargs), self.result)

        call.__name__ = self.method
        call.__doc__ = self.__doc__
        return call


class Host:
    """One connection to a subagent-host server: every protocol method, its events, its end.

    Make one with `Host.start(args)` (starts the server as a child process and ends
    it on exit) or `Host.connect(reader, writer)` (streams the caller already has);
    use it as an async context manager, or call `aclose()`.

    Methods (each a coroutine; keywords are the params' snake_case fields):
    `initialize`, `ping`, `preflight`, `spawn`, `status`, `stop`, `resume`, `agents_list`,
    LSP's `shutdown`, and the notifications `detach` and `exit`. `events(run_id)` follows
    a run, `wait(run_id)` returns its final snapshot; `request(method, params)` sends any
    method with plain JSON. An interactive child (`spawn(interactive=True)`, protocol.md
    §23) is talked to with `send`, `interrupt`, `close_run` and `permit`, and
    `answer_permissions(run_id, decide)` answers its permissions from a callback.
    Errors are `HostError` subclasses (`client/errors.py`); a call cancelled while it
    waits sends `$/cancelRequest` and raises `CancelledError`.
    """

    ping = Call("ping", PingParams, PingResult, "liveness, identity, session binding, limits (§5).")
    preflight = Call(
        "preflight",
        PreflightParams,
        PreflightResult,
        "check a launch, or approve a resume with `resume=ResumeRequest(...)` (§14, §15).",
    )
    spawn = Call(
        "spawn", SpawnParams, RunSnapshot, "start a run; `mode='task'` answers once it ended (§8)."
    )
    stop = Call("stop", StopParams, RunSnapshot, "end a run's processes; its final snapshot (§10).")
    resume = Call(
        "resume", ResumeParams, RunSnapshot, "a new attempt, with a token from preflight (§15)."
    )
    agents_list = Call(
        "agents/list",
        AgentsListParams,
        AgentsListResult,
        "the agent definitions `spawn(agent=...)` can use (§18).",
    )
    initialize = Call(
        "initialize",
        InitializeParams,
        InitializeResult,
        "the optional handshake: protocol version, capabilities, every limit (§5.1).",
    )

    def __init__(
        self,
        reader: ByteReader,
        writer: ByteWriter,
        *,
        framing: Framing | str = Framing.NDJSON,
        on_message: MessageObserver | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        process: asyncio.subprocess.Process | None = None,
    ) -> None:
        """Use `Host.connect` or `Host.start`; `process` is the server `start` started."""
        self._converter = make_converter(forbid_extra_keys=False)
        self._params = ParamsWriter()
        self._events = EventRouter()
        self.process = process
        """The server process when `start` started it, else None."""
        self._connection = Connection(
            reader,
            writer,
            framing=Framing(framing),
            on_notification=self._notified,
            on_close=self._events.close,
            on_message=on_message,
            max_message_bytes=max_message_bytes,
        )

    @classmethod
    def connect(
        cls, reader: ByteReader, writer: ByteWriter, **options: Unpack[ConnectOptions]
    ) -> Host:
        """A client over streams the caller has (e.g. `asyncio.open_connection`'s pair).

        `framing`: `ndjson` or `lsp` (protocol.md §2), as the server reads it.
        `on_message` sees every message as it arrives (parsed JSON), before it is
        handled; if it raises, the connection ends with that error. Needs a running
        event loop. `aclose()` closes the writer, reads on until the server ends its
        output (bounded), then stops reading.
        """
        return cls(reader, writer, **options)

    @classmethod
    def start(
        cls,
        args: Sequence[str] = (),
        *,
        framing: Framing | str = Framing.NDJSON,
        program: Sequence[str] | None = None,
        stderr: StreamTarget = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        on_message: MessageObserver | None = None,
        own_session: bool = False,
    ) -> _Starting:
        """Start a server as a child process and connect to its stdin and stdout.

        `args` are the server's options (`["--state-dir", d]`); `program` is the
        command (default: this installation's, `python -m subagent_host`). Use as
        `async with Host.start(...) as host` or `host = await Host.start(...)`. On
        `aclose()` the server's stdin is closed and it is waited for (bounded); if it
        has not exited it is sent SIGTERM, then SIGKILL: it is never left behind.

        `own_session=True` starts the server in a session of its own: a terminal's Ctrl-C
        (SIGINT to the foreground process group) then reaches the caller only, which
        decides how its runs end (`subagent-host run` stops its run, then closes).
        """
        command = server_command(args, program)
        return _Starting(cls, command, framing, stderr, env, cwd, on_message, own_session)

    @classmethod
    def adopt(
        cls,
        process: asyncio.subprocess.Process,
        *,
        framing: Framing | str = Framing.NDJSON,
        on_message: MessageObserver | None = None,
    ) -> Host:
        """A client of a server process the caller started with piped stdin and stdout
        (`server_process.start_server_process`): from here on it is as if `start` had
        started it, and `aclose()` ends it the same way. Needs a running event loop."""
        assert process.stdout is not None and process.stdin is not None
        return cls(
            process.stdout, process.stdin, framing=framing, on_message=on_message, process=process
        )

    # --- methods ---------------------------------------------------------------------

    async def call(self, method: str, params: object, result: type[R]) -> R:
        """Send `params` (a wire type) as `method`'s params and read its result as `result`."""
        raw = await self._connection.request(method, self._params.write(params))
        answer = self._converter.structure(raw, result)
        if isinstance(answer, PingResult):
            self._connection.max_request_bytes = answer.limits.max_message_bytes
        elif isinstance(answer, InitializeResult):
            self._connection.max_request_bytes = answer.capabilities.limits.max_message_bytes
        return answer

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Send any method with plain JSON params (camelCase) and return its plain result."""
        return await self._connection.request(method, dict(params) if params is not None else None)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send any notification with plain JSON params (never answered)."""
        await self._connection.notify(method, dict(params) if params is not None else None)

    @overload
    async def status(self, run_id: str, *, since: int | None = None) -> RunSnapshot: ...

    @overload
    async def status(self, run_id: None = None) -> RunList: ...

    async def status(
        self, run_id: str | None = None, *, since: int | None = None
    ) -> RunSnapshot | RunList:
        """`status`: a run's snapshot (with `since`: its events after that seq), or without a
        `run_id` this session's runs (protocol.md §9)."""
        params = StatusParams(run_id=run_id, since=since)
        if run_id is None:
            return await self.call("status", params, RunList)
        return await self.call("status", params, RunSnapshot)

    # --- interactive children (protocol.md §23) ---------------------------------------

    async def send(
        self,
        run_id: str,
        text: str,
        *,
        index: int | None = None,
        delivery: Delivery | str | None = None,
    ) -> SendResult:
        """`run/send`: a live message to an interactive child (§23.2).

        `index`: the child (absent: the run's one interactive child); `delivery`:
        `queue` (absent: when the current turn ends) or `steer` (into the current turn
        where its CLI can take it there). The result's `state` says whether it was
        `delivered` (written to the child) or `queued`; its `message_id` is what the
        `input` events that follow carry. Raises `RequestRefused` (`data["reason"]`:
        `not-interactive`, `not-running`) when the child takes no message now,
        `InvalidParams` for an empty text or one over 64 KiB of UTF-8.
        """
        params = SendParams(
            run_id=run_id, text=text, index=index, delivery=cast(Delivery | None, delivery)
        )  # a bare string is checked as the server checks it (`ParamsWriter`)
        return await self.call("run/send", params, SendResult)

    async def interrupt(self, run_id: str, *, index: int | None = None) -> InterruptResult:
        """`run/interrupt`: end the child's current turn, not the child (§23.3).

        `interrupted` is False when no turn ran (nothing was done); else its `turn` event
        with `stop_reason="interrupted"` follows. Raises `RequestRefused` as `send` does.
        """
        return await self.call(
            "run/interrupt", InterruptParams(run_id=run_id, index=index), InterruptResult
        )

    async def close_run(self, run_id: str, *, index: int | None = None) -> RunSnapshot:
        """`run/close`: end the conversation of the child `index`, or of every interactive
        child of the run (absent), as a CLI ends at the end of its input (§23.3).

        Answered once they have ended: with the run's final snapshot (`completed`) when
        nothing else of it runs. Closing what already ended is a no-op
        (`already_terminal` for an ended run). Raises `RequestRefused`
        (`not-interactive`; `not-running` for a child that has not started).
        """
        return await self.call("run/close", CloseParams(run_id=run_id, index=index), RunSnapshot)

    async def permit(self, run_id: str, permission_id: str, option_id: str) -> PermitResult:
        """`run/permit`: answer a pending permission with one of the options it offers
        (§23.4): its `permission` event's (`options`), or its entry in the run's
        `pending_permissions`. The result's `kind` says what the answer does. Raises
        `RequestRefused` (`not-pending`) when none of that id waits (never asked,
        answered already, timed out, its child ended), `InvalidParams` for an option it
        does not offer.
        """
        params = PermitParams(run_id=run_id, permission_id=permission_id, option_id=option_id)
        return await self.call("run/permit", params, PermitResult)

    async def answer_permissions(self, run_id: str, decide: Decide) -> list[PermitResult]:
        """Answer the run's permissions with `decide` until the run ends; the answers given.

        `decide(permission)` (a function or a coroutine function) is called with each
        `PendingPermission`: those pending now, then each asked later (a `permission`
        event with stage `asked`), one at a time, in order. It returns an option the
        permission offers, the kind of one (`OptionKind.ALLOW_ONCE`: the first offered
        of that kind), the option's id, or None to leave it unanswered. A permission
        answered meanwhile (by another client, its timeout, its child's end) or
        withdrawn is passed over. Returns once the run is terminal (at once for one
        that is); run it as a task beside what talks to the run. Raises what `decide`
        raises, `ValueError` for a kind the permission does not offer, `InvalidParams`
        for an option id it does not offer, `HostConnectionError` if the connection
        ends first.
        """
        snapshot = await self.status(run_id)
        answers: list[PermitResult] = []
        for pending in snapshot.pending_permissions or ():
            await self._answer(snapshot.run_id, pending, decide, answers)
        if snapshot.status in TERMINAL:
            return answers
        async for event in self.events(snapshot.run_id, since=snapshot.last_seq):
            asked = event.event
            if isinstance(asked, PermissionEvent) and asked.stage is PermissionStage.ASKED:
                await self._answer(snapshot.run_id, asked.pending(), decide, answers)
        return answers

    async def _answer(
        self,
        run_id: str,
        permission: PendingPermission,
        decide: Decide,
        answers: list[PermitResult],
    ) -> None:
        option_id = option_id_of(permission, await decided(decide, permission))
        if option_id is None:
            return
        try:
            answers.append(await self.permit(run_id, permission.permission_id, option_id))
        except RequestRefused as refused:
            data = refused.data if isinstance(refused.data, dict) else {}
            if data.get("reason") != NOT_PENDING:
                raise

    async def detach(self, run_id: str) -> None:
        """`run/detach`: answer this run's waiting `task`-mode calls now (§8.6)."""
        await self._connection.notify(
            "run/detach", self._converter.unstructure(DetachParams(run_id=run_id))
        )

    async def shutdown(self) -> None:
        """`shutdown` (LSP's, §6): answered null; from then on the server refuses every
        request (`InvalidRequest`) and takes only `exit`. Its runs go on until it ends."""
        await self._connection.request("shutdown", None)

    async def exit(self) -> None:
        """`exit` (LSP's, §6): the server reads nothing more and ends as at end of input
        (background runs end `cancelled`), with status 0 after `shutdown()`, else 1.
        `aclose()` then waits for it."""
        await self._connection.notify("exit", None)

    # --- events ----------------------------------------------------------------------

    async def events(self, run_id: str, *, since: int = 0) -> AsyncIterator[EventWire]:
        """Yield the run's events with `seq > since`, in order, until its terminal status.

        `run_id` is the run's id (or a unique prefix of it). Events that arrived
        before the iteration began are included (the newest of recent runs are kept;
        a run whose first events are not is read back), and any gap (events not kept,
        or dropped while the caller was slow) is read back with `status {since}`, so
        each event comes once. Events the server no longer retains are skipped
        (protocol.md §9). Ends when the run's terminal `status` event has been
        yielded, or at once for a run already over. Raises `HostConnectionError` if
        the connection ends first.
        """
        listener = self._events.listen(run_id)
        try:
            last, held = since, _newer(listener.take_now(), since)
            first, read_back = True, False
            while True:
                while (event := held.pop(last + 1, None)) is not None:
                    last, read_back, first = event.seq, False, False
                    yield event
                    if isinstance(event.event, StatusEvent) and event.event.status in TERMINAL:
                        return
                if held and read_back:
                    last = min(held) - 1  # events the server no longer holds: gone for good
                    continue
                if (first or held) and not read_back:
                    snapshot = await self.status(run_id, since=last)
                    read_back = True
                    if snapshot.run_id != listener.run_id:  # a prefix: follow the full id
                        self._events.forget(listener)
                        listener = self._events.listen(snapshot.run_id)
                    held.update(_newer(snapshot.events or (), last))
                    if snapshot.first_retained_seq is not None:
                        last = max(last, snapshot.first_retained_seq - 1)
                    if snapshot.status in TERMINAL and snapshot.last_seq <= last and not held:
                        return
                else:
                    held.update(_newer(await listener.take(), last))
                first = False
                held.update(_newer(listener.take_now(), last))
        finally:
            self._events.forget(listener)

    async def wait(self, run_id: str) -> RunSnapshot:
        """Return the run's snapshot once it is terminal (at once if it already is)."""
        snapshot = await self.status(run_id)
        if snapshot.status in TERMINAL:
            return snapshot
        async for _event in self.events(snapshot.run_id, since=snapshot.last_seq):
            pass
        return await self.status(snapshot.run_id)

    def _notified(self, method: str, params: Any) -> None:
        if method == "run/event":
            self._events.publish(self._converter.structure(params, EventWire))

    # --- the end ---------------------------------------------------------------------

    @property
    def closed(self) -> HostConnectionError | None:
        """Why the connection ended, once it has."""
        return self._connection.closed

    async def __aenter__(self) -> Host:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection; a server this client started is ended (see `start`).

        If cancelled meanwhile, the server is killed and reaped before
        `CancelledError` is raised again.
        """
        process = self.process
        if process is None:
            await self._connection.aclose(DRAIN_WAIT_S)
            return
        try:
            self._connection.close_output()
            if not await _exited(process, EXIT_WAIT_S):
                logger.warning("server %d did not exit on end of input: SIGTERM", process.pid)
                _signal(process, signal.SIGTERM)
                if not await _exited(process, TERMINATE_WAIT_S):
                    logger.warning("server %d ignored SIGTERM: SIGKILL", process.pid)
                    _signal(process, signal.SIGKILL)
                    await _exited(process, KILL_WAIT_S)
        except asyncio.CancelledError:
            _signal(process, signal.SIGKILL)
            await asyncio.shield(_exited(process, KILL_WAIT_S))
            raise
        finally:
            await self._connection.aclose(KILL_WAIT_S)  # it has exited: its output has ended


class _Starting:
    """What `Host.start` returns: awaited, a started `Host`; entered, one closed on exit."""

    def __init__(
        self,
        kind: type[Host],
        command: list[str],
        framing: Framing | str,
        stderr: StreamTarget,
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        on_message: MessageObserver | None,
        own_session: bool,
    ) -> None:
        self._kind = kind
        self._command = command
        self._framing = framing
        self._stderr = stderr
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._on_message = on_message
        self._own_session = own_session
        self._host: Host | None = None

    async def _start(self) -> Host:
        process = await start_server_process(
            self._command,
            stderr=self._stderr,
            env=self._env,
            cwd=self._cwd,
            own_session=self._own_session,
        )
        return self._kind.adopt(process, framing=self._framing, on_message=self._on_message)

    def __await__(self) -> Generator[Any, None, Host]:
        return self._start().__await__()

    async def __aenter__(self) -> Host:
        self._host = await self._start()
        return self._host

    async def __aexit__(self, *exc_info: Any) -> None:
        assert self._host is not None
        await self._host.__aexit__(*exc_info)  # the started host's own ending


def _newer(events: Sequence[EventWire] | tuple[EventWire, ...], last: int) -> dict[int, EventWire]:
    return {event.seq: event for event in events if event.seq > last}


async def _exited(process: asyncio.subprocess.Process, within_s: float) -> bool:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), within_s)
    return process.returncode is not None


def _signal(process: asyncio.subprocess.Process, signum: signal.Signals) -> None:
    # By the pid of the one process this client started; "already gone" is fine.
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)
