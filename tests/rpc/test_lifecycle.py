"""LSP's `shutdown` and `exit` in the dispatcher and the connection, with a fake method table.

After `shutdown` a request is -32600 and a notification other than `exit` is
ignored (LSP 3.17); the connection reads nothing after `exit`; the exit status
is 0 when `shutdown` came first, else 1.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, cast

import attrs
import pytest

from subagent_host.rpc.connection import Connection
from subagent_host.rpc.dispatch import Method
from subagent_host.rpc.framing import AutoDecoder
from subagent_host.rpc.lifecycle import Lifecycle
from subagent_host.rpc.stdio import InputStream, OutputStream
from tests.rpc.test_dispatch import Empty, request
from tests.rpc.test_dispatch import Harness as DispatchHarness

SHUT_DOWN = (
    "invalid request: the server is shut down: after shutdown, only the exit notification is taken"
)
EXITING = "invalid request: the server is exiting: the exit notification was received"


@attrs.frozen
class Note:
    text: str


class Harness(DispatchHarness):
    """The dispatcher of tests/rpc/test_dispatch.py with a table of LSP's two lifecycle
    messages, a slow request and a notification that records what it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []
        self.protocol.attach(self.table(), lambda body: self.sent.append(json.loads(body)))

    @property
    def lifecycle(self) -> Lifecycle:
        return self.protocol.lifecycle

    def table(self) -> dict[str, Method]:
        def shutdown(_params: Empty) -> None:
            self.lifecycle.shut_down()

        def exit_(_params: Empty) -> None:
            self.lifecycle.exit()

        def note(params: Note) -> None:
            self.notes.append(params.text)

        return {
            "shutdown": Method(Empty, shutdown),
            "exit": Method(Empty, exit_, notification=True),
            "note": Method(Note, note, notification=True),
            "ping": Method(Empty, lambda _params: "pong"),
            "slow": Method(Empty, self.slow),
        }


def notification(method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def refused(msg_id: int, message: str = SHUT_DOWN) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32600, "message": message}}


@pytest.fixture
def rpc() -> Harness:
    return Harness()


async def test_shutdown_answers_null_and_every_later_request_is_invalid_request(
    rpc: Harness,
) -> None:
    rpc.send(request(1, "ping"))
    rpc.send(request(2, "shutdown"))
    rpc.send(request(3, "ping"))
    rpc.send(request(4, "no-such-method"))
    rpc.send(request(5, "ping", {"bad": 1}))  # refused before its params are read
    assert await rpc.settle() == [
        {"jsonrpc": "2.0", "id": 1, "result": "pong"},
        {"jsonrpc": "2.0", "id": 2, "result": None},
        refused(3),
        refused(4),
        refused(5),
    ]
    assert rpc.lifecycle.is_shut_down and not rpc.lifecycle.has_exited


async def test_a_second_shutdown_is_invalid_request_as_any_request_after_the_first(
    rpc: Harness,
) -> None:
    rpc.send(request(1, "shutdown"))
    rpc.send(request(2, "shutdown"))
    assert await rpc.settle() == [{"jsonrpc": "2.0", "id": 1, "result": None}, refused(2)]


async def test_notifications_after_shutdown_are_ignored_but_exit(rpc: Harness) -> None:
    rpc.send(notification("note", {"text": "before"}))
    rpc.send(request(1, "shutdown"))
    rpc.send(notification("note", {"text": "after"}))
    rpc.send(notification("$/cancelRequest", {"id": 1}))
    assert rpc.notes == ["before"]
    rpc.send(notification("exit"))
    assert rpc.lifecycle.has_exited and rpc.lifecycle.exit_status == 0
    assert await rpc.settle() == [{"jsonrpc": "2.0", "id": 1, "result": None}]


async def test_a_request_read_before_shutdown_is_still_answered_normally(rpc: Harness) -> None:
    rpc.send(request(1, "slow"))
    rpc.send(request(2, "shutdown"))
    # Answered inline, while the slow request still waits.
    assert rpc.sent == [{"jsonrpc": "2.0", "id": 2, "result": None}]
    rpc.release.set()
    assert await rpc.settle() == [
        {"jsonrpc": "2.0", "id": 2, "result": None},
        {"jsonrpc": "2.0", "id": 1, "result": {"released": True}},
    ]


async def test_in_a_batch_the_requests_after_shutdown_are_refused_in_their_places(
    rpc: Harness,
) -> None:
    rpc.send([request(1, "ping"), request(2, "shutdown"), request(3, "ping")])
    assert await rpc.settle() == [
        [
            {"jsonrpc": "2.0", "id": 1, "result": "pong"},
            {"jsonrpc": "2.0", "id": 2, "result": None},
            refused(3),
        ]
    ]


async def test_exit_without_shutdown_gives_status_1_and_refuses_the_rest_of_its_batch(
    rpc: Harness,
) -> None:
    assert rpc.lifecycle.exit_status == 0  # end of input, no exit: 0 as ever
    rpc.send([request(1, "ping"), notification("exit"), request(2, "ping")])
    assert await rpc.settle() == [
        [{"jsonrpc": "2.0", "id": 1, "result": "pong"}, refused(2, EXITING)]
    ]
    assert rpc.lifecycle.has_exited and rpc.lifecycle.exit_status == 1


class Chunks:
    """An input stream that hands out the given chunks, then end of input."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = list(chunks)
        self.reads = 0

    async def read(self) -> bytes:
        self.reads += 1
        return self.chunks.pop(0) if self.chunks else b""

    def close(self) -> None:
        pass


class Output:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass

    def watch_backlog(self, full: Callable[[], None], drained: Callable[[], None]) -> None:
        pass


def lines(data: bytes) -> list[Any]:
    return [json.loads(line) for line in data.splitlines()]


async def test_the_connection_reads_nothing_after_exit_not_even_the_rest_of_its_chunk(
    rpc: Harness,
) -> None:
    output = Output()
    wire = Connection(rpc.protocol, AutoDecoder(1 << 20, None), cast(OutputStream, output))
    rpc.protocol.attach(rpc.table(), wire.emit)
    source = Chunks(
        b'{"jsonrpc":"2.0","id":1,"method":"shutdown"}\n'
        b'{"jsonrpc":"2.0","method":"exit"}\n'
        b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n',
        b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n',
    )
    await asyncio.wait_for(wire.read_until_eof(cast(InputStream, source)), 5)
    assert source.reads == 1 and source.chunks  # returned at exit, the next chunk unread
    wire.flush()
    assert lines(bytes(output.data)) == [{"jsonrpc": "2.0", "id": 1, "result": None}]
    assert rpc.lifecycle.exit_status == 0
