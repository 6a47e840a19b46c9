"""Each bad input of protocol.md §3 and §4 gets its exact answer; the server lives on."""

from __future__ import annotations

import asyncio
from typing import Any, Final

import psutil
import pytest

from tests.e2e.harness import (
    REPLY_TIMEOUT_S,
    FramingName,
    ServerProcess,
    frame,
    running_server,
)

FRAMINGS: list[FramingName] = ["ndjson", "lsp"]
SMALL_LIMIT = 4096


def error(code: int, message: str, msg_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


async def assert_still_serving(server: ServerProcess) -> None:
    reply = await server.request("ping", msg_id="after")
    assert reply["result"]["pong"] is True


async def finish_cleanly(server: ServerProcess) -> list[Any]:
    code, rest = await server.finish()
    assert code == 0, server.stderr_text
    return rest


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "parse error: JSON nesting is too deep"),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xc3\x28"}}',
            "parse error: invalid UTF-8 at byte 55",
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
            "parse error: NaN is not valid JSON",
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":Infinity}}',
            "parse error: Infinity is not valid JSON",
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}',
            "parse error: -Infinity is not valid JSON",
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":1e999}}',
            "parse error: number 1e999 is out of range",
        ),
        (
            b'{"jsonrpc":"2.0","id":' + b"7" * 4301 + b',"method":"ping"}',
            "parse error: an integer has more than 4300 digits",
        ),
    ],
    ids=[
        "deep-nesting",
        "invalid-utf8",
        "nan",
        "infinity",
        "minus-infinity",
        "overflowing-float",
        "4301-digit-integer",
    ],
)
async def test_json_python_would_mishandle_is_a_parse_error_with_a_null_id(
    framing: FramingName, body: bytes, message: str
) -> None:
    async with running_server(framing=framing) as server:
        await server.send_raw(frame(body, framing))
        assert await server.receive() == error(-32700, message)
        await assert_still_serving(server)
        assert await finish_cleanly(server) == []


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_a_4300_digit_id_is_still_an_integer_and_comes_back_exactly(
    framing: FramingName,
) -> None:
    big = int("9" * 4300)
    async with running_server(framing=framing) as server:
        reply = await server.request("ping", msg_id=big)
        assert reply["id"] == big
        await finish_cleanly(server)


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_message_over_the_size_limit_is_invalid_request_and_skipped(
    framing: FramingName,
) -> None:
    async with running_server("--max-message-bytes", str(SMALL_LIMIT), framing=framing) as server:
        padding = "x" * (SMALL_LIMIT + 1)
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"%b"}}' % padding.encode()
        await server.send_raw(frame(body, framing))
        reply = await server.receive()
        assert reply["id"] is None and reply["error"]["code"] == -32600
        assert reply["error"]["message"].startswith("message too large: ")
        assert reply["error"]["message"].endswith(f"(the limit is {SMALL_LIMIT} bytes)")
        await assert_still_serving(server)
        assert await finish_cleanly(server) == []


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_params_that_do_not_fit_list_every_problem(framing: FramingName) -> None:
    async with running_server(framing=framing) as server:
        reply = await server.request("ping", {"sessionId": "bad id!", "colour": "red"}, msg_id=7)
        assert reply == {
            "jsonrpc": "2.0",
            "id": 7,
            "error": {
                "code": -32602,
                "message": "invalid params: sessionId: invalid session id: use 1-128 characters "
                "of A-Z a-z 0-9 . _ : -, starting with a letter or digit; colour: unknown field",
                "data": {
                    "errors": [
                        {
                            "path": "sessionId",
                            "message": "invalid session id: use 1-128 characters of "
                            "A-Z a-z 0-9 . _ : -, starting with a letter or digit",
                        },
                        {"path": "colour", "message": "unknown field"},
                    ]
                },
            },
        }
        await finish_cleanly(server)


async def test_agents_list_takes_no_params() -> None:
    async with running_server() as server:
        reply = await server.request("agents/list", {"verbose": True})
        assert reply["error"]["code"] == -32602
        assert reply["error"]["data"]["errors"] == [{"path": "verbose", "message": "unknown field"}]
        reply = await server.request("agents/list", {})
        assert reply["result"] == {"agents": [], "diagnostics": []}
        await finish_cleanly(server)


async def test_lsp_missing_content_length_is_a_parse_error_and_the_next_message_is_served() -> None:
    async with running_server(framing="lsp") as server:
        await server.send_raw(
            b'Content-Type: application/vscode-jsonrpc\r\n\r\n{"jsonrpc":"2.0"}\r\n'
        )
        assert await server.receive() == error(-32700, "parse error: missing Content-Length header")
        await assert_still_serving(server)
        await finish_cleanly(server)


async def test_lsp_duplicate_content_length_is_a_parse_error_and_its_body_skipped() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    async with running_server(framing="lsp") as server:
        await server.send_raw(
            b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n%b" % (len(body), len(body), body)
        )
        assert await server.receive() == error(
            -32700, "parse error: duplicate Content-Length header"
        )
        await assert_still_serving(server)
        assert await finish_cleanly(server) == []  # the duplicated request was never run


async def test_lsp_non_numeric_content_length_is_a_parse_error() -> None:
    async with running_server(framing="lsp") as server:
        await server.send_raw(b"Content-Length: twelve\r\n\r\n{}\r\n")
        assert await server.receive() == error(
            -32700, "parse error: Content-Length 'twelve' is not a number"
        )
        await assert_still_serving(server)
        await finish_cleanly(server)


async def test_lsp_huge_content_length_is_refused_without_reading_it() -> None:
    async with running_server(framing="lsp") as server:
        await server.send_raw(b"Content-Length: 2147483648\r\n\r\n{}")
        assert await server.receive() == error(
            -32600, "message too large: 2147483648 bytes (the limit is 16777216 bytes)"
        )
        # The declared 2 GiB are skipped as they arrive, so nothing more is answered.
        assert await finish_cleanly(server) == []


async def test_lsp_short_body_at_eof_is_reported_then_the_server_exits_0() -> None:
    async with running_server(framing="lsp") as server:
        await server.send_raw(b'Content-Length: 100\r\n\r\n{"jsonrpc":"2.0","id":1,')
        assert await finish_cleanly(server) == [
            error(-32700, "parse error: input ended inside a message body (24 of 100 bytes)")
        ]


MIB: Final = 1024 * 1024
# An endless line: far more than any limit, sent a MiB at a time (never held whole).
ENDLESS_LINE_MIB: Final = 200
# What the server may grow by while it skips that line: the limits hold a message
# (16 MiB) or a header block (8 KiB), never the line.
RSS_GROWTH_BOUND: Final = 50 * MIB
DEFAULT_LIMIT: Final = 16 * MIB


async def replies_until(server: ServerProcess, last_id: str) -> list[Any]:
    """Every message up to the reply with `last_id`; fails at a second error for one line."""
    replies: list[Any] = []
    while True:
        message = await server.receive()
        replies.append(message)
        assert sum("error" in reply for reply in replies) <= 1, replies[:3]
        if message.get("id") == last_id:
            return replies


@pytest.mark.parametrize(
    ("framing", "start", "answer"),
    [
        ("lsp", b"Content-Length: 1", error(-32700, "parse error: header block is too large")),
        ("lsp", b"X-Junk: ", error(-32700, "parse error: header block is too large")),
        (
            "ndjson",
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"',
            error(
                -32600,
                f"message too large: more than {DEFAULT_LIMIT} bytes "
                f"(the limit is {DEFAULT_LIMIT} bytes)",
            ),
        ),
    ],
    ids=["lsp-content-length", "lsp-other-header", "ndjson"],
)
async def test_an_endless_line_is_answered_once_and_skipped_in_flat_memory(
    framing: FramingName, start: bytes, answer: dict[str, Any]
) -> None:
    async with running_server(framing=framing) as server:
        assert (await server.request("ping", msg_id="before"))["result"]["pong"] is True
        process = psutil.Process(server.pid)
        baseline = peak = process.memory_info().rss
        replies = asyncio.create_task(replies_until(server, "after"))
        stdin = server.proc.stdin
        assert stdin is not None
        stdin.write(start)
        chunk = b"1" * MIB
        for _ in range(ENDLESS_LINE_MIB):
            if replies.done():  # a second error already: no use sending the rest
                break
            stdin.write(chunk)
            await asyncio.wait_for(stdin.drain(), REPLY_TIMEOUT_S)
            peak = max(peak, process.memory_info().rss)
        # The line ends; the next message is read and answered as always.
        await server.send_raw(
            b"\r\n" + frame(b'{"jsonrpc":"2.0","id":"after","method":"ping"}', framing)
        )
        *skipped, pong = await asyncio.wait_for(replies, REPLY_TIMEOUT_S)
        assert skipped == [answer]
        assert pong["result"]["pong"] is True
        assert peak - baseline < RSS_GROWTH_BOUND, (baseline, peak)
        assert await finish_cleanly(server) == []


async def test_ndjson_last_line_without_newline_is_still_served() -> None:
    async with running_server() as server:
        await server.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        [reply] = await finish_cleanly(server)
        assert reply["id"] == 1 and reply["result"]["pong"] is True
