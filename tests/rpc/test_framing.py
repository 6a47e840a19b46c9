"""The decoders of both framings, fed whole, byte by byte and in random chunks."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subagent_host.rpc.framing import (
    DETECTED_LSP_HINT,
    AutoDecoder,
    BadFrame,
    Frame,
    LspDecoder,
    NdjsonDecoder,
    Parsed,
    encode_frame,
)
from subagent_host.values import Framing

LIMIT = 1024
BIG = 1 << 20


def lsp(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


def decode_all(decoder: AutoDecoder, chunks: list[bytes]) -> list[Frame]:
    """Feed every chunk, then finish: the frames a whole input yields."""
    frames: list[Frame] = []
    for chunk in chunks:
        frames.extend(decoder.feed(chunk))
    frames.extend(decoder.finish())
    return frames


def feed_in_chunks(
    data: bytes, sizes: list[int], forced: Framing | None = None, limit: int = LIMIT
) -> list[Frame]:
    decoder = AutoDecoder(limit, forced)
    chunks, start = [], 0
    for size in sizes:
        chunks.append(data[start : start + size])
        start += size
    chunks.append(data[start:])
    return decode_all(decoder, chunks)


def byte_by_byte(data: bytes, forced: Framing | None = None) -> list[Frame]:
    return decode_all(AutoDecoder(LIMIT, forced), [data[i : i + 1] for i in range(len(data))])


def parse_error(frame: Frame) -> str:
    assert isinstance(frame, BadFrame) and frame.kind == "parse-error", frame
    return frame.message


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
messages = st.lists(
    st.dictionaries(st.text(max_size=8), json_values, max_size=4), min_size=1, max_size=8
)


@settings(max_examples=200)
@given(values=messages, data=st.data())
def test_ndjson_yields_the_same_messages_however_the_bytes_are_split(
    values: list[dict[str, Any]], data: st.DataObject
) -> None:
    stream = b"".join(json.dumps(v).encode() + b"\n" for v in values)
    sizes = data.draw(st.lists(st.integers(1, 64), max_size=40))
    assert feed_in_chunks(stream, sizes, limit=BIG) == [Parsed(v) for v in values]


@settings(max_examples=200)
@given(values=messages, data=st.data())
def test_lsp_yields_the_same_messages_however_the_bytes_are_split(
    values: list[dict[str, Any]], data: st.DataObject
) -> None:
    stream = b"".join(lsp(json.dumps(v).encode()) for v in values)
    sizes = data.draw(st.lists(st.integers(1, 64), max_size=40))
    assert feed_in_chunks(stream, sizes, limit=BIG) == [Parsed(v) for v in values]


@pytest.mark.parametrize("split", ["whole", "byte-by-byte"])
def test_ndjson_skips_blank_lines_and_tolerates_crlf_and_a_missing_last_newline(split: str) -> None:
    stream = b'\n  {"a":1}\r\n\r\n\n[2]\n{"b":3}'
    frames = byte_by_byte(stream) if split == "byte-by-byte" else feed_in_chunks(stream, [])
    assert frames == [Parsed({"a": 1}), Parsed([2]), Parsed({"b": 3})]


def test_auto_detects_ndjson_from_an_opening_brace_or_bracket_after_whitespace() -> None:
    for first in (b"{}", b"[]"):
        decoder = AutoDecoder(LIMIT)
        decoder.feed(b" \r\n\t" + first + b"\n")
        assert decoder.framing is Framing.NDJSON


@pytest.mark.parametrize("stream", [b"\xef\xbb\xbf{}\n", b"\n\xef\xbb\xbf [1]\n"])
def test_a_leading_byte_order_mark_does_not_hide_ndjson(stream: bytes) -> None:
    assert byte_by_byte(stream) == [
        Parsed(json.loads(stream.decode("utf-8-sig").strip(" \n\ufeff")))
    ]
    decoder = AutoDecoder(LIMIT)
    decoder.feed(stream)
    assert decoder.framing is Framing.NDJSON


def test_auto_detects_lsp_from_anything_else() -> None:
    decoder = AutoDecoder(LIMIT)
    assert decoder.feed(b"\n\n") == [] and decoder.framing is None
    assert decoder.feed(lsp(b"{}")) == [Parsed({})]
    assert decoder.framing is Framing.LSP


def test_forced_framing_is_not_redetected() -> None:
    assert byte_by_byte(b'{"a":1}\n', Framing.LSP)[0] == BadFrame(
        "parse-error", "parse error: malformed header line '{\"a\":1}'"
    )
    assert parse_error(feed_in_chunks(lsp(b"{}"), [], Framing.NDJSON)[0]).startswith(
        "parse error: Expecting value"
    )


@pytest.mark.parametrize("split", ["whole", "byte-by-byte"])
def test_ndjson_line_over_the_limit_is_reported_once_and_the_next_line_still_parses(
    split: str,
) -> None:
    stream = b"[" + b"1," * LIMIT + b"1]\n{}\n"
    frames = byte_by_byte(stream) if split == "byte-by-byte" else feed_in_chunks(stream, [])
    assert len(frames) == 2
    assert isinstance(frames[0], BadFrame) and frames[0].kind == "too-large"
    assert frames[1] == Parsed({})


def test_ndjson_line_exactly_at_the_limit_is_accepted() -> None:
    body = b'["' + b"x" * (LIMIT - 4) + b'"]'
    assert feed_in_chunks(body + b"\n", [7]) == [Parsed(["x" * (LIMIT - 4)])]


def test_ndjson_bad_lines_are_reported_and_do_not_disturb_the_good_ones() -> None:
    frames = feed_in_chunks(b'{"a":\n{"ok":true}\nnot json\n', [3, 5])
    assert parse_error(frames[0]).startswith("parse error:")
    assert frames[1] == Parsed({"ok": True})
    assert parse_error(frames[2]).startswith("parse error:")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"a":NaN}', "NaN is not valid JSON"),
        (b"[Infinity]", "Infinity is not valid JSON"),
        (b"[-Infinity]", "-Infinity is not valid JSON"),
        (b"[1e400]", "number 1e400 is out of range"),
        (b'{"a":"\xff"}', "invalid UTF-8 at byte 6"),
        (b"[" + b"9" * 4301 + b"]", "an integer has more than 4300 digits"),
        (b"[" * 100_000 + b"]" * 100_000, "JSON nesting is too deep"),
    ],
)
def test_inputs_python_json_would_mishandle_are_parse_errors(body: bytes, expected: str) -> None:
    assert parse_error(NdjsonDecoder(10**7).feed(body + b"\n")[0]) == f"parse error: {expected}"


def test_lsp_accepts_content_type_utf8_bare_newlines_and_any_header_case() -> None:
    stream = (
        b"content-length: 2\nContent-Type: application/vscode-jsonrpc; charset=utf-8\n\n{}"
        b"CONTENT-LENGTH:3\r\n\r\n[1]"
    )
    assert byte_by_byte(stream) == [Parsed({}), Parsed([1])]


def test_lsp_missing_content_length_is_reported_and_the_decoder_resynchronizes() -> None:
    stream = b"Content-Type: application/json\r\n\r\n{}\n" + lsp(b"[1]")
    frames = byte_by_byte(stream)
    assert parse_error(frames[0]) == "parse error: missing Content-Length header"
    assert frames[1:] == [Parsed([1])]


def test_lsp_duplicate_content_length_is_reported_and_its_body_skipped() -> None:
    stream = b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}" + lsp(b"[1]")
    frames = feed_in_chunks(stream, [5, 11])
    assert parse_error(frames[0]) == "parse error: duplicate Content-Length header"
    assert frames[1:] == [Parsed([1])]


def test_lsp_conflicting_content_lengths_are_reported_and_the_decoder_resynchronizes() -> None:
    stream = b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}\n" + lsp(b"[1]")
    frames = byte_by_byte(stream)
    assert parse_error(frames[0]) == "parse error: conflicting Content-Length headers"
    assert frames[1:] == [Parsed([1])]


@pytest.mark.parametrize("value", [b"abc", b"-5", b"1.5", b"0x10", b"", b"9" * 25])
def test_lsp_non_numeric_content_length_is_reported(value: bytes) -> None:
    stream = b"Content-Length: " + value + b"\r\n\r\n{}\n" + lsp(b"[1]")
    frames = byte_by_byte(stream)
    assert "is not a number" in parse_error(frames[0])
    assert frames[1:] == [Parsed([1])]


def test_lsp_huge_content_length_is_refused_without_allocating_and_skipped() -> None:
    decoder = LspDecoder(LIMIT)
    frames = decoder.feed(b"Content-Length: 2147483648\r\n\r\n" + b"x" * 4096)
    assert frames == [
        BadFrame("too-large", "message too large: 2147483648 bytes (the limit is 1024 bytes)")
    ]
    assert len(decoder._buffer) == 0  # counted off, never kept


def test_lsp_body_over_the_limit_is_skipped_exactly_and_the_next_message_parses() -> None:
    body = b'"' + b"x" * LIMIT + b'"'
    frames = byte_by_byte(lsp(body) + lsp(b"{}"))
    assert isinstance(frames[0], BadFrame) and frames[0].kind == "too-large"
    assert frames[1:] == [Parsed({})]


def test_lsp_short_body_at_end_of_input_is_reported() -> None:
    frames = feed_in_chunks(b'Content-Length: 40\r\n\r\n{"jsonrpc":', [])
    assert parse_error(frames[0]) == (
        "parse error: input ended inside a message body (11 of 40 bytes)"
    )


def test_lsp_header_cut_off_at_end_of_input_is_reported() -> None:
    assert parse_error(byte_by_byte(b"Content-Len")[0]) == (
        "parse error: input ended inside a header block"
    )


def test_lsp_unsupported_charset_is_reported_and_its_body_skipped() -> None:
    stream = b"Content-Length: 2\r\nContent-Type: text/json; charset=latin-1\r\n\r\n{}" + lsp(b"1")
    frames = byte_by_byte(stream)
    assert parse_error(frames[0]) == "parse error: unsupported charset 'latin-1' (only utf-8)"
    assert frames[1:] == [Parsed(1)]


def test_lsp_endless_header_block_is_cut_off() -> None:
    stream = b"X-Filler: " + b"y" * 10_000 + b"\r\n\r\n" + lsp(b"[]")
    frames = feed_in_chunks(stream, [100] * 120)
    assert parse_error(frames[0]) == "parse error: header block is too large"
    assert frames[1:] == [Parsed([])]


@pytest.mark.parametrize("start", [b"Content-Length: 1", b"content-type: a", b"X-Junk: "])
def test_lsp_an_unterminated_header_line_is_reported_once_and_skipped_to_its_end(
    start: bytes,
) -> None:
    # A line that may begin a header block is no exception: once it is over the
    # bound, it is not taken up again from its start by the resync.
    decoder = AutoDecoder(LIMIT, Framing.LSP)
    frames = decoder.feed(start)
    for _ in range(256):  # 4 MiB, as the server reads it: 16 KiB at a time
        frames += decoder.feed(b"1" * 16_384)
    frames += decoder.feed(b"\r\n" + lsp(b"[]"))
    frames += decoder.finish()
    assert [parse_error(frame) for frame in frames[:-1]] == [
        "parse error: header block is too large"
    ]
    assert frames[-1] == Parsed([])


def test_lsp_garbage_between_messages_is_reported_then_skipped() -> None:
    frames = byte_by_byte(lsp(b"{}") + b"hello there\r\nmore junk\r\n" + lsp(b"[]"))
    assert frames[0] == Parsed({})
    assert parse_error(frames[1]) == "parse error: malformed header line 'hello there'"
    assert frames[2:] == [Parsed([])]


def test_lsp_wrong_length_then_recovery() -> None:
    # The length is one short: the body does not parse, the tail is not a header,
    # and the decoder finds the next message on the following line.
    stream = b'Content-Length: 6\r\n\r\n{"a":1}\n' + lsp(b"[1]")
    frames = byte_by_byte(stream)
    assert parse_error(frames[0]).startswith("parse error:")
    assert parse_error(frames[1]) == "parse error: malformed header line '}'"
    assert frames[2:] == [Parsed([1])]


def test_random_garbage_never_raises_and_yields_only_frames() -> None:
    rng = random.Random(1234)
    for _ in range(200):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        for framing in (None, Framing.LSP, Framing.NDJSON):
            frames = feed_in_chunks(blob, [rng.randrange(1, 30) for _ in range(20)], framing)
            assert all(isinstance(frame, Parsed | BadFrame) for frame in frames)


def test_encode_frame_writes_each_framing() -> None:
    assert encode_frame(b"{}", Framing.NDJSON) == b"{}\n"
    assert encode_frame(b"{}", Framing.LSP) == b"Content-Length: 2\r\n\r\n{}"


def test_a_stray_first_line_says_lsp_was_detected_and_how_to_force_ndjson() -> None:
    frames = decode_all(AutoDecoder(LIMIT), [b'help\n{"jsonrpc":"2.0","id":1,"method":"ping"}\n'])
    # One answer says why; the JSON line after it is skipped while looking for a header.
    assert [parse_error(frame) for frame in frames] == [
        "parse error: malformed header line 'help'" + DETECTED_LSP_HINT
    ]
    assert "--framing ndjson" in DETECTED_LSP_HINT


def test_no_detection_hint_when_lsp_was_forced_or_a_real_header_came_first() -> None:
    forced = decode_all(AutoDecoder(LIMIT, Framing.LSP), [b"help\n"])
    assert parse_error(forced[0]) == "parse error: malformed header line 'help'"
    after_header = byte_by_byte(lsp(b"{}") + b"help\r\n" + lsp(b"[]"))
    assert parse_error(after_header[1]) == "parse error: malformed header line 'help'"
