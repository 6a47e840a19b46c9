"""Framing (protocol.md §2): NDJSON, LSP Content-Length, partial and split writes,
framing errors and recovery (§2.3), and strict JSON (§3.1)."""

from __future__ import annotations

import asyncio

from ..connection import Connection, encode, frame
from ..registry import case, error_of, expect, expect_equal, result_of
from ..trial import Trial
from .steps import still_serving


def ping(msg_id: object) -> bytes:
    return encode({"jsonrpc": "2.0", "id": msg_id, "method": "ping"})


def under_headers(headers: bytes, body: bytes) -> bytes:
    """`body` after a header block of our own, its `%d` the body's length."""
    return headers % len(body) + body


async def parse_error_for(t: Trial, body: bytes, which: str) -> Connection:
    """Send one framed body the server must not parse: it answers -32700 with id null."""
    conn = await t.start()
    await conn.send_raw(frame(body, t.framing))
    error_of(await conn.reply(None, f"-32700 {which}"), -32700)
    return conn


async def lsp_resynchronizes(t: Trial, junk: bytes) -> Connection:
    """Junk, then a good message: -32700 with id null for the junk, an answer for the message."""
    conn = await t.start()
    await conn.send_raw(junk)
    await conn.send_raw(frame(ping(2), "lsp"))
    error_of(await conn.reply(None, "a -32700 with id null"), -32700)
    result_of(await conn.reply(2), "after resynchronizing on the next Content-Length")
    return conn


@case("framing.ndjson.one-reply-per-line", "§2.1", framings=("ndjson",))
async def ndjson_line(t: Trial) -> None:
    conn = await t.start()
    await conn.send_raw(ping(1) + b"\n")
    result_of(await conn.reply(1))


@case("framing.ndjson.crlf-accepted", "§2.1", framings=("ndjson",))
async def ndjson_crlf(t: Trial) -> None:
    conn = await t.start()
    await conn.send_raw(ping(1) + b"\r\n" + ping(2) + b"\r\n")
    result_of(await conn.reply(1))
    result_of(await conn.reply(2))


@case("framing.ndjson.blank-lines-ignored", "§2.1", framings=("ndjson",))
async def ndjson_blank(t: Trial) -> None:
    conn = await t.start()
    await conn.send_raw(ping(1) + b"\n\n   \n\r\n" + ping(2) + b"\n")
    await conn.reply(2)
    expect_equal([m.get("id") for m in conn.responses()], [1, 2], "the answers' ids")


@case("framing.ndjson.last-line-without-newline", "§2.1", framings=("ndjson",))
async def ndjson_last_line(t: Trial) -> None:
    conn = await t.start()
    await conn.send_raw(ping(1))
    await conn.close_stdin()
    result_of(await conn.reply(1))
    expect_equal(await conn.wait_exit(t.reply_timeout), 0, "the exit status at end of input")


@case("framing.lsp.reply-headers", "§2.2", framings=("lsp",))
async def lsp_headers(t: Trial) -> None:
    conn = await t.start()
    await conn.send_raw(frame(ping(1), "lsp"))
    await conn.reply(1)
    header = conn.headers[0]
    expect(
        header.startswith(b"Content-Length: ")
        and header.endswith(b"\r\n\r\n")
        and header.count(b"\r\n") == 2,
        "exactly 'Content-Length: N\\r\\n\\r\\n' before the body",
        repr(header),
    )


@case("framing.lsp.header-variants", "§2.2", framings=("lsp",))
async def lsp_variants(t: Trial) -> None:
    conn = await t.start()
    headers = (
        b"content-LENGTH: %d\nContent-Type: application/vscode-jsonrpc; charset=utf-8\n"
        b"X-Other: ignored\n\n"
    )
    await conn.send_raw(under_headers(headers, ping(1)))
    result_of(await conn.reply(1), "lower-case name, bare LF, Content-Type and another header")


@case("framing.lsp.missing-content-length", "§2.3", framings=("lsp",))
async def lsp_missing_length(t: Trial) -> None:
    junk = b"Content-Type: application/json\r\n\r\n" + ping(1) + b"\r\n"
    conn = await lsp_resynchronizes(t, junk)
    expect(not conn.answers(1), "the body without Content-Length not run", conn.answers(1))


@case("framing.lsp.non-decimal-length", "§2.3", framings=("lsp",))
async def lsp_bad_length(t: Trial) -> None:
    await lsp_resynchronizes(t, b"Content-Length: 1.5\r\n\r\n")


@case("framing.lsp.charset-not-utf8", "§2.3", framings=("lsp",))
async def lsp_charset(t: Trial) -> None:
    conn = await t.start()
    headers = b"Content-Length: %d\r\nContent-Type: application/json; charset=latin-1\r\n\r\n"
    await conn.send_raw(under_headers(headers, ping(1)))
    await still_serving(conn)
    error_of(await conn.reply(None, "a -32700 with id null"), -32700)
    expect(not conn.answers(1), "the latin-1 body skipped, not run", conn.answers(1))


@case("framing.lsp.input-ends-inside-body", "§2.3", framings=("lsp",))
async def lsp_cut(t: Trial) -> None:
    conn = await t.start()
    await conn.send_raw(b"Content-Length: 100\r\n\r\n" + ping(1)[:20])
    await conn.close_stdin()
    error = error_of(await conn.reply(None, "a -32700 for the cut-off body"), -32700)
    expect(isinstance(error.get("message"), str), "a message", error)
    expect_equal(await conn.wait_exit(t.reply_timeout), 0, "the exit status at end of input")


@case("framing.partial-writes", "§2")
async def partial_writes(t: Trial) -> None:
    conn = await t.start()
    data = frame(ping(1), t.framing)
    for index in range(len(data)):
        await conn.send_raw(data[index : index + 1])
    result_of(await conn.reply(1), "a message written one byte at a time")


@case("framing.message-split-across-writes", "§2")
async def split_writes(t: Trial) -> None:
    conn = await t.start()
    first, second = frame(ping(1), t.framing), frame(ping(2), t.framing)
    half = len(second) // 2
    await conn.send_raw(first + second[:half])
    result_of(await conn.reply(1), "the whole first message answered before the rest arrives")
    await asyncio.sleep(0.05)  # the second half comes in a later read, not the same one
    await conn.send_raw(second[half:])
    result_of(await conn.reply(2))


@case("framing.several-messages-in-one-write", "§2")
async def several(t: Trial) -> None:
    conn = await t.start()
    await conn.send_raw(b"".join(frame(ping(i), t.framing) for i in (1, 2, 3)))
    for msg_id in (1, 2, 3):
        result_of(await conn.reply(msg_id))


@case("framing.detected-after-leading-whitespace", "§2")
async def leading_whitespace(t: Trial) -> None:
    conn = await t.start()
    await conn.send_raw(b" \t\r\n\n" + frame(ping(1), t.framing))
    result_of(await conn.reply(1), f"{t.framing} detected past spaces, tabs, CR and LF")


@case("framing.message-too-large", "§2.3")
async def too_large(t: Trial) -> None:
    conn = await t.start("--max-message-bytes", "1024")
    big = encode({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "y" * 4000}})
    await conn.send_raw(frame(big, t.framing))
    await conn.send_raw(frame(ping(2), t.framing))
    error = error_of(await conn.reply(None, "-32600 'message too large'"), -32600)
    expect("too large" in str(error.get("message")), "the message 'message too large'", error)
    result_of(await conn.reply(2), "the next message after the skipped one")


@case("json.parse-error", "§3.1")
async def parse_error(t: Trial) -> None:
    conn = await parse_error_for(t, b'{"jsonrpc": "2.0", "id": 1, "method": ', "with id null")
    await still_serving(conn)


@case("json.nan-refused", "§3.1")
async def nan(t: Trial) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"sessionId":NaN}}'
    conn = await parse_error_for(t, body, "for NaN")
    expect(not conn.answers(1), "no answer with id 1", conn.answers(1))


@case("json.number-out-of-range", "§3.1")
async def out_of_range(t: Trial) -> None:
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"spawn","params":{"command":["true"],"timeoutMs":1e999}}'
    )
    await parse_error_for(t, body, "for 1e999")


@case("json.invalid-utf8", "§3.1")
async def invalid_utf8(t: Trial) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"sessionId":"a\xff"}}'
    conn = await parse_error_for(t, body, "for bytes that are not UTF-8")
    await still_serving(conn)


@case("json.nesting-too-deep", "§3.1")
async def too_deep(t: Trial) -> None:
    nested = b"[" * 20000 + b"]" * 20000
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":%b}}' % nested
    conn = await parse_error_for(t, body, "for 20000 levels of nesting")
    await still_serving(conn)


@case("json.duplicate-keys-last-wins", "§3.1")
async def duplicate_keys(t: Trial) -> None:
    conn = await t.start()
    await conn.send_raw(frame(b'{"jsonrpc":"2.0","id":10,"id":11,"method":"ping"}', t.framing))
    result_of(await conn.reply(11), "an answer with the last id, 11")
    expect(not conn.answers(10), "no answer with id 10", conn.answers(10))
