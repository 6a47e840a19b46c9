"""A client's side of one JSON-RPC connection: frames out, frames in, replies matched by id.

Below it: two byte streams (a child's pipes, or whatever a host already has).
Above it: `Host`, which types the params and results. It frames with the
server's own code (`rpc/framing.py`, `rpc/json_codec.py`), gives each request
the next integer id, wakes the caller its reply belongs to, hands every
notification to one callback, and answers a request from the server (this
server sends none) with -32601. Cancelling a waiting call sends
`$/cancelRequest` for its id (protocol.md §3.5).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from typing import Any, Final, Protocol

from subagent_host.client.errors import HostConnectionError, InvalidRequest, error_from
from subagent_host.rpc.codes import INVALID_REQUEST, METHOD_NOT_FOUND
from subagent_host.rpc.framing import (
    BadFrame,
    LspDecoder,
    NdjsonDecoder,
    encode_frame,
    too_large,
)
from subagent_host.rpc.json_codec import encode_json
from subagent_host.values import Framing

logger = logging.getLogger(__name__)

JSONRPC: Final = "2.0"
READ_CHUNK: Final = 64 * 1024
# Replies can be large (a `status {since}` holds up to 8 MiB of events): room for that
# and more, while a server that never ends a message still cannot take all memory.
MAX_MESSAGE_BYTES: Final = 256 * 1024 * 1024

MessageObserver = Callable[[Any], None]
"""Called with every message as it arrives (the parsed JSON value), before it is handled."""
NotificationHandler = Callable[[str, Any], None]
"""Called with the method and params of each notification from the server."""
CloseHandler = Callable[[HostConnectionError], None]
"""Called once, when the connection has ended, with why."""


class ByteReader(Protocol):
    """What a connection reads from (`asyncio.StreamReader` is one)."""

    async def read(self, n: int = -1) -> bytes: ...


class ByteWriter(Protocol):
    """What a connection writes to (`asyncio.StreamWriter` is one)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


class Connection:
    """Requests and notifications over one pair of streams, in one framing."""

    def __init__(
        self,
        reader: ByteReader,
        writer: ByteWriter,
        *,
        framing: Framing,
        on_notification: NotificationHandler,
        on_close: CloseHandler,
        on_message: MessageObserver | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._framing = framing
        self._decoder = (
            NdjsonDecoder(max_message_bytes)
            if framing is Framing.NDJSON
            else LspDecoder(max_message_bytes)
        )
        self._on_notification = on_notification
        self._on_close = on_close
        self._on_message = on_message
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._closed: HostConnectionError | None = None
        self.max_request_bytes: int | None = None
        """The most the server reads in one message (its `maxMessageBytes`), once known
        (`Host` learns it from `ping` and `initialize`). A request over it is refused
        here in the server's words: the server would answer it with `id: null`, which
        no caller can be told of, and the call would wait forever."""
        self._reading = asyncio.create_task(self._read_loop(), name="subagent-host client reader")

    @property
    def closed(self) -> HostConnectionError | None:
        """Why the connection ended, once it has (None while it is open)."""
        return self._closed

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and return its result; raise its error as a `HostError`.

        Cancelling the caller while it waits sends `$/cancelRequest` for the id
        and re-raises `CancelledError` at once (the server's -32800 answer is
        dropped when it comes). Raises `HostConnectionError` when the connection ends
        first.
        """
        if self._closed is not None:
            raise self._closed
        msg_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": JSONRPC, "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        body = encode_json(message)
        limit = self.max_request_bytes
        if limit is not None and len(body) > limit:
            raise InvalidRequest(INVALID_REQUEST, too_large(limit, len(body)).message)
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = reply
        try:
            self._write_body(body)
            await self._drain()
            answer = await reply
        except asyncio.CancelledError:
            # The task's cancellation cancels the future it waits on: unanswered is
            # "not done, or cancelled", not merely "not done".
            if (reply.cancelled() or not reply.done()) and self._closed is None:
                # Written at once, not awaited: a cancelled task should not wait again.
                self._write(
                    {"jsonrpc": JSONRPC, "method": "$/cancelRequest", "params": {"id": msg_id}}
                )
            raise
        finally:
            self._pending.pop(msg_id, None)
        if "error" in answer:
            raise error_from(answer["error"])
        return answer.get("result")

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (never answered)."""
        if self._closed is not None:
            raise self._closed
        message: dict[str, Any] = {"jsonrpc": JSONRPC, "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)
        await self._drain()

    async def wait_closed(self) -> HostConnectionError:
        """Return once the server's output has ended (or the connection failed)."""
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self._reading)
        assert self._closed is not None
        return self._closed

    def close_output(self) -> None:
        """Close what we write to: the server sees the end of its input (protocol.md §6)."""
        with contextlib.suppress(ConnectionError, RuntimeError):
            self._writer.close()

    async def aclose(self, drain_s: float) -> None:
        """Close our output, read what the server still sends until it ends its output
        (at most `drain_s`), then stop reading; waiting calls raise `HostConnectionError`."""
        self.close_output()
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self._writer.wait_closed()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._reading), drain_s)
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        self._end(HostConnectionError("the connection was closed"))

    # --- writing ---------------------------------------------------------------------

    def _write(self, message: dict[str, Any]) -> None:
        self._write_body(encode_json(message))

    def _write_body(self, body: bytes) -> None:
        # One synchronous write per message: frames never interleave, whoever writes.
        try:
            self._writer.write(encode_frame(body, self._framing))
        except (ConnectionError, RuntimeError) as exc:
            raise HostConnectionError(f"cannot write to the server: {exc}") from exc

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise HostConnectionError(f"cannot write to the server: {exc}") from exc

    # --- reading ---------------------------------------------------------------------

    async def _read_loop(self) -> None:
        reason = HostConnectionError("the server closed its output")
        try:
            while chunk := await self._reader.read(READ_CHUNK):
                for frame in self._decoder.feed(chunk):
                    self._receive(frame)
            for frame in self._decoder.finish():
                self._receive(frame)
        except HostConnectionError as exc:
            reason = exc
        except (ConnectionError, OSError) as exc:
            reason = HostConnectionError(f"cannot read from the server: {exc}")
        except Exception as exc:  # an observer's failure (a test's assertion) ends it
            reason = HostConnectionError(f"a message could not be handled: {exc!r}")
            reason.__cause__ = exc
        finally:
            self._end(reason)

    def _receive(self, frame: Any) -> None:
        if isinstance(frame, BadFrame):
            # A lost frame may have been a reply: nothing after it can be trusted.
            raise HostConnectionError(f"the server sent what is not a message: {frame.message}")
        message = frame.value
        if self._on_message is not None:
            self._on_message(message)
        for item in message if isinstance(message, list) else (message,):
            self._route(item)

    def _route(self, message: Any) -> None:
        if not isinstance(message, dict):
            raise HostConnectionError(f"the server sent what is not a message: {message!r:.200}")
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                self._refuse(message["id"], method)
            else:
                self._on_notification(method, message.get("params"))
            return
        msg_id = message.get("id")
        reply = self._pending.get(msg_id) if type(msg_id) is int else None
        if reply is None or reply.done():
            # A cancelled call's late answer, or an error about no request (`id: null`).
            logger.debug("dropped a reply no call waits for: %.200r", message)
            return
        reply.set_result(message)

    def _refuse(self, msg_id: Any, method: str) -> None:
        error = {"code": METHOD_NOT_FOUND, "message": f"method not found: {method}"}
        with contextlib.suppress(HostConnectionError):
            self._write({"jsonrpc": JSONRPC, "id": msg_id, "error": error})

    def _end(self, reason: HostConnectionError) -> None:
        if self._closed is not None:
            return
        self._closed = reason
        for reply in self._pending.values():
            if not reply.done():
                reply.set_exception(reason)
        self._on_close(reason)
