"""A loopback-only, threaded mock LLM HTTP server that the real agent CLIs can talk to.

Serves the OpenAI chat completions API (pi's `openai-completions`), the OpenAI
responses API (codex's `wire_api = "responses"`, pi's `openai-responses`) and the
Anthropic messages API (Claude Code, pi's `anthropic-messages`), streamed as SSE or
not. What it answers is decided per request by `tests/mock_llm/scenario.py`; every
request is logged so a test can check what a CLI sent.

Tests use it as a context manager::

    with MockLLM() as mock:
        env["ANTHROPIC_BASE_URL"] = mock.base_url
        ...
        mock.wait_for_request(lambda r: r.path.startswith("/v1/messages"), timeout=10)
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final

from tests.mock_llm import wire
from tests.mock_llm.scenario import (
    DEFAULT_SLEEP_COMMAND,
    DEFAULT_TOOL_COMMAND,
    Api,
    IdSource,
    JSONObject,
    JSONValue,
    Reply,
    as_object,
    count_input_tokens,
    decide_reply,
    read_conversation,
)

LOOPBACK_HOST: Final = "127.0.0.1"
DEFAULT_MODEL: Final = "mock-model"
# A stuck client must not hold a handler thread (and so close()) forever.
SOCKET_TIMEOUT_S: Final = 300.0
# Bounds close(): handler threads are woken first, so this is only a backstop.
CLOSE_JOIN_TIMEOUT_S: Final = 10.0

_ROOT_BODY: Final = b"mock-llm ok\n"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the mock received it."""

    method: str
    path: str
    headers: dict[str, str]
    raw_body: str
    """The body as text ("" when there was none)."""
    body: JSONValue
    """The parsed JSON body, or None when the body was empty or not JSON."""
    time: float
    """When it arrived, `time.time()`."""

    def body_object(self) -> JSONObject:
        """The body if it is a JSON object, else an empty dict."""
        return as_object(self.body)


def refuse_non_loopback(host: str) -> None:
    """Raise ValueError unless `host` is 127.0.0.1: the mock never listens elsewhere."""
    if host != LOOPBACK_HOST:
        raise ValueError(f"MockLLM binds to {LOOPBACK_HOST} only, not {host!r}")


@dataclass
class _Shared:
    """State the handler threads share with the `MockLLM` that owns them."""

    model: str
    tool_command: str
    sleep_command: str
    ids: IdSource = field(default_factory=IdSource)
    closing: threading.Event = field(default_factory=threading.Event)
    log: list[RecordedRequest] = field(default_factory=list)
    log_changed: threading.Condition = field(default_factory=threading.Condition)
    connections: set[socket.socket] = field(default_factory=set)
    connections_lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, request: RecordedRequest) -> None:
        with self.log_changed:
            self.log.append(request)
            self.log_changed.notify_all()

    def track(self, connection: socket.socket) -> None:
        with self.connections_lock:
            self.connections.add(connection)
            is_closing = self.closing.is_set()
        if is_closing:
            _shutdown_socket(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self.connections_lock:
            self.connections.discard(connection)

    def shutdown_connections(self) -> None:
        with self.connections_lock:
            connections = list(self.connections)
        for connection in connections:
            _shutdown_socket(connection)


class _HTTPServer(ThreadingHTTPServer):
    def __init__(self, port: int, shared: _Shared) -> None:
        self.shared = shared
        super().__init__((LOOPBACK_HOST, port), _Handler)

    def handle_error(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any
    ) -> None:
        """Ignore connections dropped by the client or by close(); report anything else."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class MockLLM:
    """A mock LLM server on 127.0.0.1; use `with MockLLM() as mock:` or start()/close()."""

    def __init__(
        self,
        *,
        host: str = LOOPBACK_HOST,
        port: int = 0,
        model: str = DEFAULT_MODEL,
        tool_command: str = DEFAULT_TOOL_COMMAND,
        sleep_command: str = DEFAULT_SLEEP_COMMAND,
    ) -> None:
        """Configure (not start) the server; raises ValueError for a non-loopback host.

        `model` is echoed when a request names none; `tool_command` is what the default
        scenario's shell tool call runs, `sleep_command` what SLEEP-TOOL's runs.
        """
        refuse_non_loopback(host)
        self._requested_port = port
        self._shared = _Shared(model, tool_command, sleep_command)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> MockLLM:
        """Bind 127.0.0.1 (port 0 = a free port) and serve in a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("MockLLM already started")
        httpd = _HTTPServer(self._requested_port, self._shared)
        if httpd.server_address[0] != LOOPBACK_HOST:
            httpd.server_close()
            raise RuntimeError(f"bound to {httpd.server_address[0]!r}, not loopback")
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="mock-llm", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving: wake stalled streams, drop open connections, join the threads.

        Idempotent; the request log stays readable afterwards.
        """
        httpd, thread = self._httpd, self._thread
        self._shared.closing.set()
        if httpd is None or thread is None:
            return
        httpd.shutdown()
        self._shared.shutdown_connections()
        httpd.server_close()
        thread.join(CLOSE_JOIN_TIMEOUT_S)

    def __enter__(self) -> MockLLM:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The TCP port it listens on."""
        if self._httpd is None:
            raise RuntimeError("MockLLM not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`, without `/v1` (append it for the OpenAI clients)."""
        return f"http://{LOOPBACK_HOST}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`, the base URL the OpenAI clients (pi, codex) expect."""
        return f"{self.base_url}/v1"

    @property
    def is_closing(self) -> bool:
        """True once close() has begun."""
        return self._shared.closing.is_set()

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._shared.log_changed:
            return list(self._shared.log)

    def requests_containing(self, text: str) -> list[RecordedRequest]:
        """The requests whose raw body contains `text`, oldest first."""
        return [request for request in self.requests if text in request.raw_body]

    def wait_for_request(
        self, predicate: Callable[[RecordedRequest], bool], timeout: float = 10.0
    ) -> RecordedRequest:
        """Return the first logged request matching `predicate`, waiting up to `timeout` s.

        Requests already logged count. Raises TimeoutError if none arrives in time.
        """
        found: list[RecordedRequest] = []

        def matched() -> bool:
            found[:] = [request for request in self._shared.log if predicate(request)][:1]
            return bool(found)

        with self._shared.log_changed:
            if not self._shared.log_changed.wait_for(matched, timeout):
                raise TimeoutError(f"no matching request within {timeout} s")
        return found[0]


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT_S

    def setup(self) -> None:
        super().setup()
        self.server.shared.track(self.connection)

    def finish(self) -> None:
        self.server.shared.untrack(self.connection)
        try:
            super().finish()
        except OSError:
            pass  # The client or close() already dropped the socket.

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet: the request log is the record, stderr belongs to the test."""

    def do_HEAD(self) -> None:
        self._record(None)
        self._send_root(include_body=False)

    def do_GET(self) -> None:
        self._record(None)
        path = self._route_path()
        if path in ("", "/"):
            self._send_root(include_body=True)
        elif path.endswith("/models"):
            model: JSONObject = {"id": self.server.shared.model, "object": "model", "created": 0}
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._send_error_json(404, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        raw = self._read_body()
        request = self._record(raw)
        path = self._route_path()
        body = request.body_object()
        if path.endswith("/messages/count_tokens"):
            conversation = read_conversation(Api.ANTHROPIC, body)
            self._send_json(200, {"input_tokens": count_input_tokens(conversation)})
            return
        api = _api_for_path(path)
        if api is None:
            self._send_error_json(404, f"no route for POST {self.path}")
            return
        if not isinstance(request.body, dict):
            self._send_error_json(400, "request body must be a JSON object")
            return
        shared = self.server.shared
        conversation = read_conversation(api, body)
        reply = decide_reply(
            conversation,
            shared.ids,
            tool_command=shared.tool_command,
            sleep_command=shared.sleep_command,
        )
        model = body.get("model")
        model_name = model if isinstance(model, str) and model else shared.model
        try:
            if conversation.stream:
                self._send_stream(_encode_stream(api, reply, model_name))
            elif reply.is_stall:
                self._hang()
            else:
                self._send_json(200, _encode_whole(api, reply, model_name))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # The client went away mid-answer.

    def _route_path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self._read_chunked()
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding in ("gzip", "deflate"):
            raw = zlib.decompress(raw, zlib.MAX_WBITS | 32)
        return raw

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # Trailer headers, ignored.
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _record(self, raw: bytes | None) -> RecordedRequest:
        text = (raw or b"").decode("utf-8", errors="replace")
        parsed: JSONValue = None
        if text:
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={key.lower(): value for key, value in self.headers.items()},
            raw_body=text,
            body=parsed,
            time=time.time(),
        )
        self.server.shared.record(request)
        return request

    def _send_root(self, *, include_body: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(_ROOT_BODY)))
        self.end_headers()
        if include_body:
            self.wfile.write(_ROOT_BODY)

    def _send_json(self, status: int, payload: JSONObject) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", self.server.shared.ids.make("req"))
        self.end_headers()
        self.wfile.write(data)

    def _send_error_json(self, status: int, message: str) -> None:
        error: JSONObject = {
            "type": "not_found_error" if status == 404 else "invalid_request_error"
        }
        error["message"] = message
        self._send_json(status, {"type": "error", "error": error})

    def _send_stream(self, stream: wire.Stream) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", self.server.shared.ids.make("req"))
        self.end_headers()
        count = len(stream.events) if stream.stall_after is None else stream.stall_after
        for event in stream.events[:count]:
            self._write_chunk(event.encode())
        if stream.stall_after is not None:
            self._hang()
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _hang(self) -> None:
        # Keep the connection open, sending nothing, until the server closes; then drop
        # it without finishing the response so the client sees a cut-off stream.
        self.server.shared.closing.wait()
        self.close_connection = True


def _api_for_path(path: str) -> Api | None:
    if path.endswith("/chat/completions"):
        return Api.CHAT
    if path.endswith("/responses"):
        return Api.RESPONSES
    if path.endswith("/messages"):
        return Api.ANTHROPIC
    return None


def _encode_stream(api: Api, reply: Reply, model: str) -> wire.Stream:
    if api is Api.CHAT:
        return wire.chat_completion_stream(reply, model)
    if api is Api.RESPONSES:
        return wire.responses_stream(reply, model)
    return wire.anthropic_stream(reply, model)


def _encode_whole(api: Api, reply: Reply, model: str) -> JSONObject:
    if api is Api.CHAT:
        return wire.chat_completion(reply, model)
    if api is Api.RESPONSES:
        return wire.responses_object(reply, model)
    return wire.anthropic_message(reply, model)


def _shutdown_socket(connection: socket.socket) -> None:
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # Already closed by the client.
