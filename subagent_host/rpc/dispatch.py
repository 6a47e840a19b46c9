"""JSON-RPC 2.0 dispatch: the method table, the requests running, batches and cancellation.

Above: the connection loop (rpc/connection.py), which feeds this class one
`Frame` at a time and takes the encoded answers through the `emit` it attaches.
Below: the method table (`Method` entries built by the handlers package); each
handler runs inline (a plain function) or as an asyncio task (a coroutine
function) that answers from its own last step. This class answers malformed
JSON and invalid requests, collects a batch's answers into one array, reads
params into the method's wire type (-32602 for params that do not structure or
hold a string no store or `exec` can take, rpc/unsafe_text.py), keeps the table
of running requests that `$/cancelRequest` cancels (-32800), and maps errors
without tracebacks. Every request with a usable id is answered exactly once.

The request table is ours, not pygls's `JsonRPCProtocol`: pygls calls nothing
here, and from pygls only its public `JsonRpcException` classes are used
(ARCHITECTURE.md, "Why dispatch is not pygls's").
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import Any, Final

import attrs
import cattrs
from lsprotocol.types import CANCEL_REQUEST
from pygls.exceptions import JsonRpcInvalidRequest

from subagent_host.rpc.answering import AfterAnswer
from subagent_host.rpc.codes import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
)
from subagent_host.rpc.errors import (
    InvalidParams,
    error_for_exception,
    error_object,
    method_suggestion,
)
from subagent_host.rpc.framing import BadFrame, Frame
from subagent_host.rpc.json_codec import JsonEncodeError, encode_json
from subagent_host.rpc.lifecycle import Lifecycle
from subagent_host.rpc.messages import (
    InvalidRequest,
    MsgId,
    Notification,
    Request,
    classify,
    is_valid_id,
)
from subagent_host.rpc.pacing import ReplyPacer
from subagent_host.rpc.param_problems import STRUCTURE_ERRORS, ParamProblem, param_problems
from subagent_host.rpc.unsafe_text import unsafe_text_problems
from subagent_host.rpc.wire import META, WireValueError, make_converter, without_meta

logger = logging.getLogger(__name__)

JSONRPC: Final = "2.0"
_UNSET: Final = object()
# The largest encoded result remembered for reuse (`_encode_result`): one per type.
REMEMBERED_BYTES: Final = 64 * 1024
# The answers unfinished batches may hold, all together, before a paced member of one
# is refused: a batch's answer is one array, sent whole, so its replies add up.
BATCH_ANSWERS_BYTES: Final = 16 * 1024 * 1024
# Said once, without the word the error's own message starts with ("invalid params: ...").
POSITIONAL_REFUSED: Final = (
    "expected an object (this server takes them by name, not by position), got an array"
)


@attrs.frozen
class Method:
    """One entry of the method table: how to read the params, and what to call with them.

    `handler` is a coroutine function, or a plain function for a method that never
    waits (answered inline, without the cost of a task).
    """

    params_type: type[Any]
    handler: Callable[[Any], Awaitable[Any]] | Callable[[Any], Any]
    notification: bool = False
    """Only ever sent as a notification (`run/detach`): a request for it is -32601."""
    paced: bool = False
    """Its reply may be large (`status`): made only in its turn, one at a time in the
    order read, once the output drains (rpc/pacing.py)."""


@attrs.frozen
class _Entry:
    """A method of the table as dispatch runs it."""

    invoke: Callable[[Any], Any]
    """Raw params to the result; for an async handler, to the coroutine that returns it."""
    is_async: bool
    paced: bool
    notification: bool


@attrs.define
class _Remembered:
    """A result and its JSON text (`_encode_result`)."""

    value: Any
    body: bytes
    immutable: bool = False  # it hashes: frozen, nothing mutable within (checked once)


class _Batch:
    """Collects the answers of one batch; sends them as one array when the last arrives."""

    def __init__(self, size: int) -> None:
        self.replies: list[bytes | None] = [None] * size
        self.slot_of: dict[MsgId, int] = {}
        self.all_accepted = False  # every element has been accepted
        self.held = 0  # bytes of the answers in `replies`

    def is_complete(self) -> bool:
        return self.all_accepted and not self.slot_of

    def encode(self) -> bytes | None:
        parts = [reply for reply in self.replies if reply is not None]
        return b"[" + b",".join(parts) + b"]" if parts else None


class HostProtocol:
    """The server side of one connection: frames in, encoded JSON texts out."""

    def __init__(self, converter: cattrs.Converter) -> None:
        self.converter = converter
        self._entries: dict[str, _Entry] = {}
        # Every handler task still running, by request id (a notification's by a key of
        # its own): what `$/cancelRequest` and `cancel_in_flight` cancel.
        self._running: dict[object, asyncio.Future[Any]] = {}
        self._pacer = ReplyPacer()
        self._batch_bytes = 0  # the answers every unfinished batch holds (BATCH_ANSWERS_BYTES)
        self._empty: dict[type[Any], Any] = {}  # each params type structured from {}
        # The last result of each immutable type with its encoding (`_encode_result`).
        self._encoded: dict[type[Any], _Remembered] = {}
        self._mutable: set[type[Any]] = set()  # result types never remembered
        self._emit: Callable[[bytes], None] = _drop
        # Requests not yet answered, each with the batch its answer belongs in (or None).
        self._in_flight: dict[MsgId, _Batch | None] = {}
        self._answered = asyncio.Event()
        self._answered.set()
        self.lifecycle = Lifecycle()
        """LSP's `shutdown` and `exit` on this connection (the handlers mark it)."""

    def attach(
        self,
        methods: Mapping[str, Method],
        emit: Callable[[bytes], None],
        writable: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """Install the method table and the function that writes one JSON text to the client.

        `writable` returns once the output may take more (the connection's flow
        control); paced methods wait for it. Without it they only take turns.
        """
        self._entries = {name: self._entry(method) for name, method in methods.items()}
        self._emit = emit
        if writable is not None:
            self._pacer = ReplyPacer(writable)

    # --- input -----------------------------------------------------------------------

    def receive(self, frame: Frame) -> None:
        """Handle one frame from the decoder: a message, a batch, or input that was not one."""
        if isinstance(frame, BadFrame):
            code = PARSE_ERROR if frame.kind == "parse-error" else INVALID_REQUEST
            self._emit(_encode_error(None, error_object(code, frame.message)))
        elif isinstance(frame.value, list):
            self._receive_batch(frame.value)
        else:
            self._accept(frame.value, None, 0)

    def _receive_batch(self, items: list[Any]) -> None:
        if not items:
            self._emit(_encode_error(None, error_object(INVALID_REQUEST, "empty batch")))
            return
        batch = _Batch(len(items))
        for slot, item in enumerate(items):
            self._accept(item, batch, slot)
        batch.all_accepted = True
        self._finish_batch(batch)

    def _accept(self, value: Any, batch: _Batch | None, slot: int) -> None:
        incoming = classify(value)
        if isinstance(incoming, Request):
            if incoming.id in self._in_flight:
                incoming = InvalidRequest(
                    incoming.id, f"a request with id {incoming.id!r} is still in flight"
                )
            elif (refusal := self.lifecycle.refusal()) is not None:
                incoming = InvalidRequest(incoming.id, refusal)  # LSP: InvalidRequest
        if isinstance(incoming, InvalidRequest):
            reply = _encode_error(
                incoming.id, error_object(INVALID_REQUEST, f"invalid request: {incoming.reason}")
            )
            if batch is None:
                self._emit(reply)
            else:
                batch.replies[slot] = reply
        elif isinstance(incoming, Notification):
            if self.lifecycle.ignores(incoming.method):
                logger.debug("ignoring notification %s after shutdown", incoming.method)
            else:
                self._notify(incoming.method, incoming.params)
        else:
            self._in_flight[incoming.id] = batch
            self._answered.clear()
            if batch is not None:
                batch.slot_of[incoming.id] = slot
            self._start(incoming)

    # --- running handlers ------------------------------------------------------------

    def _start(self, request: Request) -> None:
        """Run the handler of a request that is now in flight; its outcome is the answer."""
        entry = self._entries.get(request.method)
        if entry is None or entry.notification:
            self._answer(request.id, _error_reply(request.id, self._not_found(request.method)))
            return
        done = partial(self._send_outcome, msg_id=request.id)
        self._run(request.id, entry, request.params, done)

    def _not_found(self, method: str) -> dict[str, Any]:
        if method in self._entries:  # a request would wait for an answer never sent
            message = f"method not found: {method} is a notification (send no id)"
        else:
            message = f"method not found: {method}{method_suggestion(method, self._entries)}"
        return error_object(METHOD_NOT_FOUND, message)

    def _run(
        self,
        key: object,
        entry: _Entry,
        params: Any,
        done: Callable[[asyncio.Future[Any]], None],
    ) -> None:
        """Run `entry`'s handler on `params`; `done` gets its outcome as a done future.

        A plain function runs now, in this step. A coroutine function runs as a
        task entered in `_running` under `key`; a paced one (rpc/pacing.py) first
        waits for its turn.
        """
        if entry.is_async:
            turn = _Turn(self._pacer, self._batch_room(key)) if entry.paced else None
            self._run_task(key, entry.invoke(params), done, turn)
            return
        # A loop future carries a synchronous outcome to the same `done` (cheaper than
        # a thread-safe concurrent Future: no lock, no condition).
        outcome: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        try:
            outcome.set_result(entry.invoke(params))
        except Exception as exc:
            outcome.set_exception(exc)
        done(outcome)

    def _run_task(
        self,
        key: object,
        work: Coroutine[Any, Any, Any],
        done: Callable[[asyncio.Future[Any]], None],
        turn: _Turn | None = None,
    ) -> None:
        """Run an async handler as a task that answers from inside itself.

        A task's done callback runs one turn of the loop after the handler
        returned; answering in the handler's own last step lets the reply leave
        in the same write as the events that woke it. The done callback stays as
        the fallback for a task cancelled before it ran (or while it waited for
        its `turn`).
        """
        answered = False
        after = AfterAnswer()

        def answer(outcome: asyncio.Future[Any]) -> None:
            nonlocal answered
            if not answered:
                answered = True
                try:
                    done(outcome)
                finally:
                    after.run()

        task = asyncio.ensure_future(_answering(work, answer, after, turn))
        self._running[key] = task
        task.add_done_callback(answer)

    def _cancel(self, params: Any) -> None:
        """`$/cancelRequest`: cancel the request it names, if it still runs.

        Its task is then answered -32800 (or as its handler says, once it stopped);
        a request answered already, or never read, is left be.
        """
        target = params.get("id") if isinstance(params, dict) else None
        if not is_valid_id(target):
            logger.warning("ignoring $/cancelRequest without a usable id")
            return
        running = self._running.pop(target, None)
        if running is None:
            logger.debug("ignoring $/cancelRequest for %r: not running", target)
        else:
            running.cancel()

    def _batch_room(self, key: object) -> Callable[[], None] | None:
        """For a member of a batch: what refuses it (-32600) once unfinished batches hold
        BATCH_ANSWERS_BYTES of answers (asked in its turn, before its reply is made)."""
        if not is_valid_id(key) or self._in_flight.get(key) is None:
            return None

        def check() -> None:
            if self._batch_bytes >= BATCH_ANSWERS_BYTES:
                raise JsonRpcInvalidRequest(
                    message=f"invalid request: unfinished batches already hold "
                    f"{BATCH_ANSWERS_BYTES // (1024 * 1024)} MiB of answers; "
                    "send this request alone"
                )

        return check

    def _entry(self, method: Method) -> _Entry:
        """The method as dispatch runs it: from raw params to its result, async if the
        handler is (its params are then read inside its task)."""
        handler = method.handler
        if inspect.iscoroutinefunction(handler):

            async def invoke_async(raw_params: Any) -> Any:
                return await handler(self.structure_params(raw_params, method.params_type))

            return _Entry(invoke_async, True, method.paced, method.notification)

        def invoke(raw_params: Any) -> Any:
            return handler(self.structure_params(raw_params, method.params_type))

        return _Entry(invoke, False, method.paced, method.notification)

    def structure_params(self, raw: Any, params_type: type[Any]) -> Any:
        """Turn raw params into the method's attrs type, or raise `InvalidParams`."""
        if raw is None or raw == {} or raw == []:
            # No params, {} or [] (what some clients send for "none", @open-rpc/client-js
            # among them): the same every time, so structured once per type.
            return self._empty_params(params_type)
        if not isinstance(raw, dict):
            problem = ParamProblem("", POSITIONAL_REFUSED)
            raise InvalidParams([problem])
        try:
            raw = without_meta(raw)  # every method's params may carry it: read nowhere else
        except WireValueError as exc:
            raise InvalidParams([ParamProblem(META, str(exc))]) from None
        if not raw:
            return self._empty_params(params_type)
        if unsafe := unsafe_text_problems(raw):
            raise InvalidParams(unsafe)
        try:
            return self.converter.structure(raw, params_type)
        except STRUCTURE_ERRORS as exc:
            raise InvalidParams(param_problems(exc)) from None

    def _empty_params(self, params_type: type[Any]) -> Any:
        empty = self._empty.get(params_type, _UNSET)
        if empty is _UNSET:
            try:
                empty = self.converter.structure({}, params_type)
            except STRUCTURE_ERRORS as exc:
                raise InvalidParams(param_problems(exc)) from None
            self._empty[params_type] = empty  # attrs frozen: safe to share
        return empty

    def _send_outcome(self, future: asyncio.Future[Any], *, msg_id: MsgId) -> None:
        """Answer a request with its handler's outcome: a result, an error, or -32800."""
        self._running.pop(msg_id, None)
        if future.cancelled():
            error = error_object(REQUEST_CANCELLED, "request cancelled")
            self._answer(msg_id, _error_reply(msg_id, error))
            return
        exc = future.exception()
        if exc is not None:
            error = self.converter.unstructure(error_for_exception(exc))  # data may be attrs
            self._answer(msg_id, _error_reply(msg_id, error))
            return
        try:
            result = self._encode_result(future.result())
        except JsonEncodeError as encode_error:
            logger.error("result of request %r is not valid JSON: %s", msg_id, encode_error)
            error = error_object(INTERNAL_ERROR, "internal error (result is not valid JSON)")
            self._answer(msg_id, _error_reply(msg_id, error))
            return
        except Exception as unstructure_error:  # a bug of ours: answer, log, keep serving
            error = error_for_exception(unstructure_error)
            self._answer(msg_id, _error_reply(msg_id, error))
            return
        self._send(msg_id, _result_reply(msg_id, result))

    def _encode_result(self, result: Any) -> bytes:
        """A handler's result as JSON text; the very object answered before is not encoded again.

        The last result of each attrs type is remembered with its encoding (when
        small). Reused only when the same object comes back and it hashes, so is
        frozen with nothing mutable (no list, no dict) anywhere within: asked only
        then, so a handler that makes a new result each time pays nothing for it.
        A handler that answers from a value it keeps while nothing changes (`ping`)
        then costs no unstructuring and no encoding.
        """
        kind = type(result)
        remembered = self._encoded.get(kind)
        if remembered is not None and remembered.value is result:
            if remembered.immutable or self._immutable(remembered):
                return remembered.body
        body = encode_json(self.converter.unstructure(result))
        if kind not in self._mutable and len(body) <= REMEMBERED_BYTES and attrs.has(kind):
            self._encoded[kind] = _Remembered(result, body)
        return body

    def _immutable(self, remembered: _Remembered) -> bool:
        """Whether a remembered result can never change (asked once per object).

        attrs hashes a frozen instance by its fields, and refuses to hash a mutable
        one or anything holding a list or a dict; a class hashed by identity
        (`eq=False`) says nothing, so is taken for mutable. (Wire types hold
        nothing hashed by identity.)
        """
        try:
            if getattr(type(remembered.value), "__hash__", None) is object.__hash__:
                raise TypeError("hashed by identity")
            hash(remembered.value)
        except TypeError:
            kind = type(remembered.value)
            self._mutable.add(kind)  # never remembered again
            del self._encoded[kind]
            return False
        remembered.immutable = True
        return True

    def _notify(self, method_name: str, params: Any) -> None:
        """Run a notification's handler; nothing is answered, a failure only logged."""
        if method_name == CANCEL_REQUEST:
            self._cancel(params)
            return
        if method_name.startswith("$/"):
            logger.debug("ignoring notification %s", method_name)
            return
        entry = self._entries.get(method_name)
        if entry is None:
            logger.warning("ignoring notification for unknown method %r", method_name)
            return
        key = object()  # its task's entry in `_running`: no request id can name it
        self._run(
            key, entry, params, partial(self._notification_done, key=key, method_name=method_name)
        )

    def _notification_done(
        self, future: asyncio.Future[Any], *, key: object, method_name: str
    ) -> None:
        self._running.pop(key, None)
        if not future.cancelled() and (exc := future.exception()) is not None:
            # Nobody to answer: the log is the only place this can go.
            error = error_for_exception(exc)
            logger.warning("notification %s failed: %s", method_name, error["message"])

    # --- output ----------------------------------------------------------------------

    def _answer(self, msg_id: MsgId, response: dict[str, Any]) -> None:
        try:
            reply = encode_json(response)
        except JsonEncodeError as exc:
            logger.error("result of request %r is not valid JSON: %s", msg_id, exc)
            reply = _encode_error(
                msg_id, error_object(INTERNAL_ERROR, "internal error (result is not valid JSON)")
            )
        self._send(msg_id, reply)

    def _send(self, msg_id: MsgId, reply: bytes) -> None:
        """Emit the one answer to `msg_id` (alone, or in its place in its batch)."""
        if msg_id not in self._in_flight:
            logger.error("dropping a second answer to request %r", msg_id)
            return
        batch = self._in_flight.pop(msg_id)
        if batch is None:
            self._emit(reply)
        else:
            batch.replies[batch.slot_of.pop(msg_id)] = reply
            batch.held += len(reply)
            self._batch_bytes += len(reply)
            self._finish_batch(batch)
        if not self._in_flight:
            self._answered.set()

    def _finish_batch(self, batch: _Batch) -> None:
        if batch.is_complete():
            self._batch_bytes -= batch.held
            reply = batch.encode()
            if reply is not None:  # an all-notification batch gets no reply at all
                self._emit(reply)

    # --- lifecycle -------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    async def wait_answered(self) -> None:
        """Return once every request read so far has been answered."""
        await self._answered.wait()

    def cancel_in_flight(self) -> None:
        """Cancel every running handler; each request is then answered -32800 (or as it says)."""
        for running in list(self._running.values()):
            running.cancel()


def make_protocol() -> HostProtocol:
    """A protocol with the wire's converter (rpc/wire/)."""
    return HostProtocol(make_converter())


def _result_reply(msg_id: MsgId, result: bytes) -> bytes:
    """`{"jsonrpc":"2.0","id":…,"result":…}` around a result already encoded: the bytes
    `encode_json` makes of the whole response, without encoding the result again."""
    encoded_id = b"%d" % msg_id if type(msg_id) is int else encode_json(msg_id)
    return b'{"jsonrpc":"2.0","id":%b,"result":%b}' % (encoded_id, result)


def _encode_error(msg_id: MsgId | None, error: dict[str, Any]) -> bytes:
    return encode_json(_error_reply(msg_id, error))


def _error_reply(msg_id: MsgId | None, error: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC, "id": msg_id, "error": error}


def _drop(_body: bytes) -> None:
    logger.error("no output attached; dropping a message")


@attrs.frozen
class _Turn:
    """How a paced request waits (rpc/pacing.py), and, for a batch's member, what
    refuses it once batches hold too much (`check_room` raises)."""

    pacer: ReplyPacer
    check_room: Callable[[], None] | None


async def _answering(
    work: Coroutine[Any, Any, Any],
    answer: Callable[[asyncio.Future[Any]], None],
    after: AfterAnswer,
    turn: _Turn | None,
) -> None:
    """Await `work`, then `answer` with its outcome as a done future.

    `after` collects what the handler asks to run once it is answered (`after_answer`).
    With a `turn`, both happen in the request's turn (rpc/pacing.py), which ends
    once the answer has been emitted.
    """
    after.enter()  # in this task's own context only
    if turn is None:
        await _answer_with(work, answer)
        return
    try:
        async with turn.pacer.turn():
            await _answer_with(work, answer, turn.check_room)
    finally:
        # Nothing once it ran; a request cancelled while it waited for its turn
        # (answered -32800 by the done callback) never started its handler.
        work.close()


async def _answer_with(
    work: Coroutine[Any, Any, Any],
    answer: Callable[[asyncio.Future[Any]], None],
    check_room: Callable[[], None] | None = None,
) -> None:
    outcome: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    try:
        if check_room is not None:
            check_room()  # a refusal is the answer; the handler never runs
        outcome.set_result(await work)
    except asyncio.CancelledError:
        outcome.cancel()
        answer(outcome)
        raise
    except Exception as exc:
        outcome.set_exception(exc)
    answer(outcome)
