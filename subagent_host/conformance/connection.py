"""One server under test: its process, and messages in and out in one framing.

The reader is the harness's own (it shares nothing with the server's parser),
keeps every message in arrival order, and checks what the server writes: strict
JSON, and in LSP framing exactly `Content-Length: N\r\n\r\n` before each body.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

import attrs

from subagent_host.conformance.mismatch import FramingName, Mismatch, short
from subagent_host.conformance.schema import Validator


@attrs.frozen
class Garbage:
    """Bytes from the server's stdout that are not a message of the framing."""

    data: bytes
    why: str


def encode(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def frame(body: bytes, framing: FramingName) -> bytes:
    if framing == "ndjson":
        return body + b"\n"
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_loads(body: bytes) -> Any:
    return json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)


@attrs.define(eq=False)
class Connection:
    """A running server and everything it has written so far."""

    proc: asyncio.subprocess.Process
    framing: FramingName
    validator: Validator
    reply_timeout: float
    log: list[Any] = attrs.field(init=False, factory=list)
    """Messages (and Garbage) in arrival order."""
    headers: list[bytes] = attrs.field(init=False, factory=list)
    """LSP header blocks as they came."""
    eof: bool = attrs.field(init=False, default=False)
    stderr: bytearray = attrs.field(init=False, factory=bytearray)
    methods: dict[Any, str] = attrs.field(init=False, factory=dict)
    """Request id -> method, for shape checks."""
    shape_problems: list[str] = attrs.field(init=False, factory=list)
    _next_id: int = attrs.field(init=False, default=0)
    _arrival: asyncio.Event = attrs.field(init=False, factory=asyncio.Event)
    _reader: asyncio.Task[None] = attrs.field(init=False)
    _stderr_reader: asyncio.Task[None] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._reader = asyncio.create_task(self._read(self.proc.stdout))
        self._stderr_reader = asyncio.create_task(self._drain(self.proc.stderr))

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- input -----------------------------------------------------------------

    async def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        try:
            await asyncio.wait_for(self.proc.stdin.drain(), self.reply_timeout)
        except TimeoutError:
            raise Mismatch("the server to read its stdin", "it stopped reading") from None
        except (BrokenPipeError, ConnectionResetError):
            raise Mismatch("the server to read its stdin", "its stdin is closed") from None

    async def send(self, message: Any) -> None:
        await self.send_raw(frame(encode(message), self.framing))

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def call(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        """Send a request; return its id."""
        if msg_id is None:
            msg_id = self.new_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.methods[_key(msg_id)] = method
        await self.send(message)
        return msg_id

    async def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def request(
        self, method: str, params: Any = None, msg_id: Any = None, within: float | None = None
    ) -> Any:
        """Send a request and return its reply (whose shape is checked), waiting `within`
        seconds for it (default: the reply timeout)."""
        msg_id = await self.call(method, params, msg_id)
        return await self.reply(msg_id, f"an answer to {method}", within)

    async def result(self, method: str, params: Any = None) -> Any:
        reply = await self.request(method, params)
        if "result" not in reply:
            raise Mismatch(f"a result for {method} {short(params, 120)}", short(reply))
        return reply["result"]

    async def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await self.proc.stdin.wait_closed()

    # -- output ----------------------------------------------------------------

    async def wait_for(
        self, predicate: Callable[[Any], bool], expected: str, within: float | None = None
    ) -> Any:
        """The first message (in arrival order) that satisfies `predicate`."""
        try:
            async with asyncio.timeout(within or self.reply_timeout):
                while True:
                    for message in self.log:
                        if isinstance(message, Garbage):
                            raise Mismatch(
                                "strict JSON messages from the server",
                                f"{message.why}: {message.data[:200]!r}",
                            )
                        if predicate(message):
                            return message
                    if self.eof:
                        raise Mismatch(expected, await self._gone())
                    self._arrival.clear()
                    await self._arrival.wait()
        except TimeoutError:
            raise Mismatch(expected, f"nothing within {within or self.reply_timeout:g} s") from None

    async def _gone(self) -> str:
        """What a client sees of a server that closed its stdout."""
        code = await self.wait_exit(1.0)
        tail = bytes(self.stderr[-300:]).decode("utf-8", "replace").strip()
        status = "" if code is None else f" (exit status {code})"
        return f"the server closed its stdout first{status}" + (f"; stderr: {tail}" if tail else "")

    async def reply(
        self, msg_id: Any, expected: str | None = None, within: float | None = None
    ) -> Any:
        key = _key(msg_id)
        try:
            message = await self.wait_for(
                lambda m: is_response(m) and _key(m.get("id")) == key,
                expected or f"an answer with id {short(msg_id)}",
                within,
            )
        except Mismatch as mismatch:
            strays = [
                short(m.get("id"))
                for m in self.responses()
                if m.get("id") is not None and _key(m.get("id")) not in self.methods
            ]
            if not strays:
                raise
            seen = f"{mismatch.seen} (answers carried ids never sent: {', '.join(strays)})"
            raise Mismatch(mismatch.expected, seen) from None
        self._check_shape(msg_id, message)
        return message

    def answers(self, msg_id: Any) -> list[Any]:
        key = _key(msg_id)
        return [m for m in self.log if is_response(m) and _key(m.get("id")) == key]

    def responses(self) -> list[Any]:
        """Every answer (batches flattened) seen so far."""
        found: list[Any] = []
        for message in self.log:
            if isinstance(message, list):
                found += [m for m in message if isinstance(m, dict)]
            elif is_response(message):
                found.append(message)
        return found

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [
            m["params"]
            for m in self.log
            if isinstance(m, dict) and m.get("method") == method and "params" in m
        ]

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return [e for e in self.notifications("run/event") if e.get("runId") == run_id]

    async def first_run_id(self, expected: str = "a run/event naming a run") -> str:
        message = await self.wait_for(lambda m: _is_event(m), expected)
        run_id: str = message["params"]["runId"]
        return run_id

    async def terminal_event(self, run_id: str, within: float | None = None) -> dict[str, Any]:
        """The run/event that says the run ended."""
        message = await self.wait_for(
            lambda m: (
                _is_event(m)
                and m["params"].get("runId") == run_id
                and m["params"].get("type") == "status"
                and m["params"].get("status") in TERMINAL
            ),
            f"a terminal status event for run {run_id}",
            within,
        )
        params: dict[str, Any] = message["params"]
        return params

    async def wait_exit(self, within: float) -> int | None:
        try:
            return await asyncio.wait_for(self.proc.wait(), within)
        except TimeoutError:
            return None

    async def finish(self, within: float) -> int | None:
        """Close stdin and wait for the server to exit (None: it did not)."""
        with contextlib.suppress(Mismatch, AssertionError):
            await self.close_stdin()
        code = await self.wait_exit(within)
        if code is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._reader), within)
        return code

    def _check_shape(self, msg_id: Any, message: Any) -> None:
        method = self.methods.get(_key(msg_id))
        if method is None or not isinstance(message, dict):
            return
        if "result" in message:
            problems = self.validator.result(method, message["result"])
        elif isinstance(message.get("error"), dict):
            problems = self.validator.error(message["error"])
        else:
            problems = ["an answer holds exactly one of result and error"]
        if problems:
            self.shape_problems += problems
            raise Mismatch(
                f"the {method} answer to match the protocol's shapes",
                "; ".join(problems[:3]),
            )

    def _arrived(self, message: Any) -> None:
        self.log.append(message)
        if isinstance(message, dict) and _is_event(message):
            problems = self.validator.notification("run/event", message["params"])
            self.shape_problems += problems
        self._arrival.set()

    async def _read(self, stream: asyncio.StreamReader) -> None:
        try:
            while True:
                body = await self._read_body(stream)
                if body is None:
                    break
                try:
                    self._arrived(strict_loads(body))
                except (ValueError, UnicodeDecodeError) as exc:
                    self._arrived(Garbage(body, f"not strict JSON ({exc})"))
        except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            self._arrived(Garbage(b"", f"broken framing ({exc})"))
        finally:
            self.eof = True
            self._arrival.set()

    async def _read_body(self, stream: asyncio.StreamReader) -> bytes | None:
        if self.framing == "ndjson":
            line = await stream.readline()
            if not line:
                return None
            if not line.endswith(b"\n"):
                raise ValueError(f"a last line without its newline: {line[:100]!r}")
            return line
        header = bytearray()
        while True:
            line = await stream.readline()
            if not line:
                if header:
                    raise ValueError(f"output ended inside a header block {bytes(header)!r}")
                return None
            header += line
            if line in (b"\r\n", b"\n"):
                break
        self.headers.append(bytes(header))
        name, _, value = bytes(header).split(b"\r\n", 1)[0].partition(b":")
        if name.strip().lower() != b"content-length" or not value.strip().isdigit():
            raise ValueError(f"a header block without Content-Length: {bytes(header)!r}")
        return await stream.readexactly(int(value.strip()))

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.stderr += chunk
            del self.stderr[:-8192]  # the tail is what explains a failure

    async def stop_reading(self) -> None:
        """Close our ends of the pipes, so nothing of the process outlives the case."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        for task in (self._reader, self._stderr_reader):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


TERMINAL = frozenset(
    {"completed", "failed", "cancelled", "timed-out", "limit-reached", "interrupted"}
)


def _key(msg_id: Any) -> tuple[str, Any]:
    """Ids compared with their type: 1, "1" and true are three different ids."""
    return (type(msg_id).__name__, msg_id)


def is_response(message: Any) -> bool:
    return isinstance(message, dict) and "method" not in message and "id" in message


def _is_event(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and message.get("method") == "run/event"
        and isinstance(message.get("params"), dict)
        and isinstance(message["params"].get("runId"), str)
    )
