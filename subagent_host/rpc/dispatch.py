"""JSON-RPC 2.0 dispatch on top of pygls's `JsonRPCProtocol`.

Above: the method table (`Method` entries built by the handlers package) and the
connection loop, which feeds this class one `Frame` at a time. Below: pygls does
the request bookkeeping, runs each handler as an asyncio task, honours
`$/cancelRequest` and routes notifications. This class adds what pygls leaves
out (checked with pygls 2.1.1): answers to malformed JSON and invalid requests,
batches, -32602 for params that do not structure or hold a string no store or
`exec` can take (rpc/unsafe_text.py), and errors without tracebacks. Every
request with a usable id is answered exactly once. It names no pygls internal:
those are all behind rpc/pygls_hooks.py.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import Any, Final

import attrs
from lsprotocol.types import CANCEL_REQUEST
from pygls.exceptions import JsonRpcInvalidRequest, JsonRpcMethodNotFound
from pygls.protocol.json_rpc import MsgId as PyglsMsgId
from pygls.server import JsonRPCServer

from subagent_host.rpc.answering import AfterAnswer
from subagent_host.rpc.codes import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, REQUEST_CANCELLED
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
from subagent_host.rpc.pygls_hooks import HandlerCall, Outcome, PyglsHooks
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
    waits (pygls then answers it inline, without the cost of a task).
    """

    params_type: type[Any]
    handler: Callable[[Any], Awaitable[Any]] | Callable[[Any], Any]
    notification: bool = False
    """Only ever sent as a notification (`run/detach`): a request for it is -32601."""
    paced: bool = False
    """Its reply may be large (`status`): made only in its turn, one at a time in the
    order read, once the output drains (rpc/pacing.py)."""


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
        self.sealed = False  # every element has been accepted
        self.held = 0  # bytes of the answers in `replies`

    def is_complete(self) -> bool:
        return self.sealed and not self.slot_of

    def encode(self) -> bytes | None:
        parts = [reply for reply in self.replies if reply is not None]
        return b"[" + b",".join(parts) + b"]" if parts else None


class HostProtocol(PyglsHooks):
    """The server side of one connection: frames in, encoded JSON texts out."""

    def __init__(self, server: JsonRPCServer, converter: Any) -> None:
        super().__init__(server, converter)
        self._invokers: dict[str, Callable[[Any], Any]] = {}
        self._notifications: frozenset[str] = frozenset()  # methods never answered
        self._inline: set[Callable[[Any], Any]] = set()  # invokers of synchronous handlers
        self._paced: set[Callable[[Any], Any]] = set()  # invokers of paced methods
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
        # pygls sets the request id in a context var; tasks copy the context when
        # they start, so one context for the dispatch step is enough.
        self._context = contextvars.copy_context()
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
        self._invokers = {name: self._invoker(method) for name, method in methods.items()}
        self._notifications = frozenset(n for n, method in methods.items() if method.notification)
        self._paced = {self._invokers[n] for n, method in methods.items() if method.paced}
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
        batch.sealed = True
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
                self.on_notification(incoming.method, incoming.params)
        else:
            self._in_flight[incoming.id] = batch
            self._answered.clear()
            if batch is not None:
                batch.slot_of[incoming.id] = slot
            # Straight to pygls's request path: `handle_message` would re-check the
            # shape we just validated, through slow runtime Protocol isinstance checks.
            self._context.run(self.start_request, incoming.id, incoming.method, incoming.params)

    # --- what pygls calls (through rpc/pygls_hooks.py) ---------------------------------

    def handler_for(self, feature_name: str) -> Callable[[Any], Any]:
        invoker = self._invokers.get(feature_name)
        if invoker is None:
            hint = method_suggestion(feature_name, self._invokers)
            raise JsonRpcMethodNotFound(message=f"method not found: {feature_name}{hint}")
        if feature_name in self._notifications:  # a request would wait for an answer never sent
            raise JsonRpcMethodNotFound(
                message=f"method not found: {feature_name} is a notification (send no id)"
            )
        return invoker

    def execute(self, call: HandlerCall) -> None:
        # Our own synchronous invokers first, by set membership, which is cheaper
        # than asking `inspect` about every request's handler.
        if call.handler not in self._inline:
            if inspect.iscoroutinefunction(call.handler):
                if call.handler in self._paced:
                    turn = _Turn(self._pacer, self._batch_room(call.msg_id))
                    self._execute_async(call.msg_id, call.run(), call.callback, turn)
                else:
                    self._execute_async(call.msg_id, call.run(), call.callback)
            else:
                self.execute_by_pygls(call)
            return
        # pygls wraps a synchronous result in a thread-safe concurrent Future (a lock
        # and a condition per request); a loop future carries it as well, for less.
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        try:
            future.set_result(call.run())
        except Exception as exc:
            future.set_exception(exc)
        call.callback(future)

    def _execute_async(
        self,
        msg_id: PyglsMsgId,
        work: Coroutine[Any, Any, Any],
        callback: Callable[[Any], None],
        turn: _Turn | None = None,
    ) -> None:
        """Run an async handler as a task that answers from inside itself.

        pygls answers from the task's done callback, one turn of the loop after
        the handler returned; answering in the handler's own last step lets the
        reply leave in the same write as the events that woke it. The done
        callback stays as the fallback for a task cancelled before it ran (or
        while it waited for its `turn`).
        """
        answered = False
        after = AfterAnswer()

        def answer(outcome: asyncio.Future[Any]) -> None:
            nonlocal answered
            if not answered:
                answered = True
                try:
                    callback(outcome)
                finally:
                    after.run()

        task = asyncio.ensure_future(_answering(work, answer, after, turn))
        self.track(msg_id, task)
        task.add_done_callback(answer)

    def _batch_room(self, msg_id: PyglsMsgId) -> Callable[[], None] | None:
        """For a member of a batch: what refuses it (-32600) once unfinished batches hold
        BATCH_ANSWERS_BYTES of answers (asked in its turn, before its reply is made)."""
        if self._in_flight.get(msg_id) is None:
            return None

        def check() -> None:
            if self._batch_bytes >= BATCH_ANSWERS_BYTES:
                raise JsonRpcInvalidRequest(
                    message=f"invalid request: unfinished batches already hold "
                    f"{BATCH_ANSWERS_BYTES // (1024 * 1024)} MiB of answers; "
                    "send this request alone"
                )

        return check

    def _invoker(self, method: Method) -> Callable[[Any], Any]:
        """A function from raw params to the method's result, async if the handler is."""
        handler = method.handler
        if inspect.iscoroutinefunction(handler):

            async def invoke_async(raw_params: Any) -> Any:
                return await handler(self.structure_params(raw_params, method.params_type))

            return invoke_async

        def invoke(raw_params: Any) -> Any:
            return handler(self.structure_params(raw_params, method.params_type))

        self._inline.add(invoke)
        return invoke

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

    def send_outcome(self, future: Outcome, msg_id: PyglsMsgId) -> None:
        self.untrack(msg_id)
        if future.cancelled():
            error = error_object(REQUEST_CANCELLED, "request cancelled")
            self._answer(msg_id, {"jsonrpc": JSONRPC, "id": msg_id, "error": error})
            return
        exc = future.exception()
        if exc is not None:
            error = self.converter.unstructure(error_for_exception(exc))  # data may be attrs
            self._answer(msg_id, {"jsonrpc": JSONRPC, "id": msg_id, "error": error})
            return
        try:
            result = self._encode_result(future.result())
        except JsonEncodeError as encode_error:
            logger.error("result of request %r is not valid JSON: %s", msg_id, encode_error)
            error = error_object(INTERNAL_ERROR, "internal error (result is not valid JSON)")
            self._answer(msg_id, {"jsonrpc": JSONRPC, "id": msg_id, "error": error})
            return
        except Exception as unstructure_error:  # a bug of ours: answer, log, keep serving
            error = error_for_exception(unstructure_error)
            self._answer(msg_id, {"jsonrpc": JSONRPC, "id": msg_id, "error": error})
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

    def send_pygls_answer(self, msg_id: PyglsMsgId, result: Any, error: Any) -> None:
        # pygls calls this for errors it raises itself (method not found).
        if error is not None:
            member = error_object(error.code, error.message, error.data)
            self._answer(msg_id, {"jsonrpc": JSONRPC, "id": msg_id, "error": member})
        else:
            self._answer(msg_id, {"jsonrpc": JSONRPC, "id": msg_id, "result": result})

    def on_notification(self, method_name: str, params: Any) -> None:
        if method_name == CANCEL_REQUEST:
            target = params.get("id") if isinstance(params, dict) else None
            if is_valid_id(target):
                self.cancel_request(target)
            else:
                logger.warning("ignoring $/cancelRequest without a usable id")
            return
        if method_name.startswith("$/"):
            logger.debug("ignoring notification %s", method_name)
            return
        invoker = self._invokers.get(method_name)
        if invoker is None:
            logger.warning("ignoring notification for unknown method %r", method_name)
            return
        key = f"notification-{uuid.uuid4()}"
        done = partial(self._notification_done, key=key, method_name=method_name)
        self.execute(HandlerCall(key, invoker, done, (params,)))

    def _notification_done(self, future: Outcome, *, key: str, method_name: str) -> None:
        self.untrack(key)
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
        for future in self.running():
            future.cancel()


class _Server(JsonRPCServer):
    """The container pygls expects around a protocol; we keep only its error reporting."""

    def report_server_error(self, error: Exception, source: Any) -> None:
        # Every error reported here was already answered to the client (or logged by us).
        logger.debug("pygls reported %s: %s", getattr(source, "__name__", source), error)


def make_protocol() -> HostProtocol:
    """A protocol with our converter, inside the pygls server object it expects."""
    server = _Server(HostProtocol, make_converter)
    assert isinstance(server.protocol, HostProtocol)
    return server.protocol


def _result_reply(msg_id: MsgId, result: bytes) -> bytes:
    """`{"jsonrpc":"2.0","id":…,"result":…}` around a result already encoded: the bytes
    `encode_json` makes of the whole response, without encoding the result again."""
    encoded_id = b"%d" % msg_id if type(msg_id) is int else encode_json(msg_id)
    return b'{"jsonrpc":"2.0","id":%b,"result":%b}' % (encoded_id, result)


def _encode_error(msg_id: MsgId | None, error: dict[str, Any]) -> bytes:
    return encode_json({"jsonrpc": JSONRPC, "id": msg_id, "error": error})


def _drop(_body: bytes) -> None:
    logger.error("no output attached; dropping a message")


@attrs.frozen
class _Turn:
    """How a paced request waits (rpc/pacing.py), and, for a batch's member, what
    refuses it once batches hold too much (`admit` raises)."""

    pacer: ReplyPacer
    admit: Callable[[], None] | None


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
            await _answer_with(work, answer, turn.admit)
    finally:
        # Nothing once it ran; a request cancelled while it waited for its turn
        # (answered -32800 by the done callback) never started its handler.
        work.close()


async def _answer_with(
    work: Coroutine[Any, Any, Any],
    answer: Callable[[asyncio.Future[Any]], None],
    admit: Callable[[], None] | None = None,
) -> None:
    outcome: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    try:
        if admit is not None:
            admit()  # a refusal is the answer; the handler never runs
        outcome.set_result(await work)
    except asyncio.CancelledError:
        outcome.cancel()
        answer(outcome)
        raise
    except Exception as exc:
        outcome.set_exception(exc)
    answer(outcome)
