"""Every example of the JSON-RPC 2.0 specification, section 7, over real stdio in both framings.

This server has none of the specification's example methods (`subtract`, `sum`,
...), so where the specification shows a result we expect its -32601 with the
same id; every error example, batch shape and silence is as the specification
shows it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.e2e.harness import FramingName, ServerProcess, frame, running_server

FRAMINGS: list[FramingName] = ["ndjson", "lsp"]


def not_found(msg_id: Any, method: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "error": {"code": -32601, "message": f"method not found: {method}"},
    }


def invalid(reason: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": f"invalid request: {reason}"},
    }


async def assert_silent(server: ServerProcess) -> None:
    """Nothing was sent for what came before: the next message is the reply to a ping."""
    reply = await server.request("ping", msg_id="sentinel")
    assert reply["result"]["pong"] is True


async def send_text(server: ServerProcess, text: str) -> None:
    await server.send_raw(frame(text.encode(), server.framing))


@pytest.fixture(params=FRAMINGS)
async def server(request: pytest.FixtureRequest) -> AsyncIterator[ServerProcess]:
    async with running_server(framing=request.param) as process:
        yield process
        code, rest = await process.finish()
        assert (code, rest) == (0, [])


async def test_rpc_call_with_positional_parameters(server: ServerProcess) -> None:
    await send_text(server, '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}')
    assert await server.receive() == not_found(1, "subtract")
    await send_text(server, '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}')
    assert await server.receive() == not_found(2, "subtract")


async def test_rpc_call_with_named_parameters(server: ServerProcess) -> None:
    await send_text(
        server,
        '{"jsonrpc": "2.0", "method": "subtract", '
        '"params": {"subtrahend": 23, "minuend": 42}, "id": 3}',
    )
    assert await server.receive() == not_found(3, "subtract")
    await send_text(
        server,
        '{"jsonrpc": "2.0", "method": "subtract", '
        '"params": {"minuend": 42, "subtrahend": 23}, "id": 4}',
    )
    assert await server.receive() == not_found(4, "subtract")


async def test_a_notification(server: ServerProcess) -> None:
    await send_text(server, '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}')
    await send_text(server, '{"jsonrpc": "2.0", "method": "foobar"}')
    await assert_silent(server)


async def test_rpc_call_of_non_existent_method(server: ServerProcess) -> None:
    await send_text(server, '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}')
    assert await server.receive() == not_found("1", "foobar")


async def test_rpc_call_with_invalid_json(server: ServerProcess) -> None:
    await send_text(server, '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
    reply = await server.receive()
    assert reply["id"] is None and reply["error"]["code"] == -32700
    assert reply["error"]["message"].startswith("parse error: ")


async def test_rpc_call_with_invalid_request_object(server: ServerProcess) -> None:
    await send_text(server, '{"jsonrpc": "2.0", "method": 1, "params": "bar"}')
    assert await server.receive() == invalid('"method" must be a string')


async def test_rpc_call_batch_invalid_json(server: ServerProcess) -> None:
    await send_text(
        server,
        '[ {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"}, '
        '{"jsonrpc": "2.0", "method" ]',
    )
    reply = await server.receive()
    assert isinstance(reply, dict) and reply["id"] is None and reply["error"]["code"] == -32700


async def test_rpc_call_with_an_empty_array(server: ServerProcess) -> None:
    await send_text(server, "[]")
    assert await server.receive() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "empty batch"},
    }


async def test_rpc_call_with_an_invalid_batch_but_not_empty(server: ServerProcess) -> None:
    await send_text(server, "[1]")
    assert await server.receive() == [invalid("a request must be a JSON object")]


async def test_rpc_call_with_invalid_batch(server: ServerProcess) -> None:
    await send_text(server, "[1,2,3]")
    assert await server.receive() == [invalid("a request must be a JSON object")] * 3


async def test_rpc_call_batch(server: ServerProcess) -> None:
    await send_text(
        server,
        """[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
    ]""".replace("\n", " "),
    )
    assert await server.receive() == [
        not_found("1", "sum"),
        not_found("2", "subtract"),
        invalid('"jsonrpc" must be exactly "2.0"'),
        not_found("5", "foo.get"),
        not_found("9", "get_data"),
    ]


async def test_rpc_call_batch_all_notifications(server: ServerProcess) -> None:
    await send_text(
        server,
        '[ {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]}, '
        '{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]} ]',
    )
    await assert_silent(server)


async def test_the_batch_example_with_ping_answers_each_member_in_order(
    server: ServerProcess,
) -> None:
    await server.send(
        [
            {"jsonrpc": "2.0", "method": "ping", "id": "a"},
            {"jsonrpc": "2.0", "method": "ping"},
            {"jsonrpc": "2.0", "method": "ping", "params": [42, 23], "id": "b"},
            {"foo": "boo"},
            {"jsonrpc": "2.0", "method": "ping", "params": {"sessionId": "s-1"}, "id": "c"},
        ]
    )
    a, b, foo, c = await server.receive()
    assert a["id"] == "a" and a["result"]["pong"] is True
    assert b["id"] == "b" and b["error"]["code"] == -32602
    assert foo == invalid('"jsonrpc" must be exactly "2.0"')
    assert c["id"] == "c" and c["result"]["sessionId"] == "s-1"
