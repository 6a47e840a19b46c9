"""Capped output and rolling tails: exact totals, bounded memory, honest markers."""

from __future__ import annotations

import random
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from subagent_host.backends.output import (
    TRUNCATION_MARKER,
    CappedOutput,
    CappedText,
    RollingTail,
    cap_text,
    count_newlines,
)


def feed_randomly(capped: CappedText, data: bytes, seed: int = 7) -> None:
    rng = random.Random(seed)
    start = 0
    while start < len(data):
        size = rng.randrange(1, 50)
        capped.feed(data[start : start + size])
        start += size


def test_small_output_is_kept_whole() -> None:
    assert cap_text("a\nb\n", 100, 10) == CappedOutput("a\nb\n", False, 4, 2)


def test_a_last_line_without_newline_counts_as_a_line() -> None:
    assert cap_text("a\nb", 100, 10) == CappedOutput("a\nb", False, 3, 2)


@pytest.mark.parametrize("chunked", [False, True])
def test_the_byte_cap_cuts_and_marks(chunked: bool) -> None:
    capped = CappedText(cap_bytes=10, cap_lines=100)
    data = b"0123456789abcdef\nmore\n"
    feed_randomly(capped, data) if chunked else capped.feed(data)
    assert capped.result() == CappedOutput("0123456789\n" + TRUNCATION_MARKER, True, len(data), 2)


@pytest.mark.parametrize("chunked", [False, True])
def test_the_line_cap_cuts_after_the_last_kept_line(chunked: bool) -> None:
    capped = CappedText(cap_bytes=1000, cap_lines=3)
    data = b"".join(b"line %d\n" % i for i in range(10))
    feed_randomly(capped, data) if chunked else capped.feed(data)
    result = capped.result()
    assert result.text == "line 0\nline 1\nline 2\n" + TRUNCATION_MARKER
    assert (result.truncated, result.bytes, result.lines) == (True, len(data), 10)


def test_a_character_cut_by_the_cap_is_dropped_not_garbled() -> None:
    capped = CappedText(cap_bytes=5, cap_lines=10)
    capped.feed("abcdé".encode())  # é is two bytes: the cap falls inside it
    assert capped.result().text == "abcd\n" + TRUNCATION_MARKER


def test_memory_stays_flat_for_a_huge_stream() -> None:
    capped, tail = CappedText(48 * 1024, 600), RollingTail(1024)
    chunk = b"x" * 1023 + b"\n"
    for _ in range(50_000):  # 50 MB
        capped.feed(chunk)
        tail.feed(chunk)
    result = capped.result()
    assert result.bytes == 50_000 * 1024 and result.lines == 50_000
    assert len(result.text) < 48 * 1024 + 100
    assert tail.text() == chunk.decode()


def test_rolling_tail_keeps_the_last_bytes() -> None:
    tail = RollingTail(limit=5)
    for piece in (b"abc", b"defgh", b"ij"):
        tail.feed(piece)
    assert tail.text() == "fghij"
    assert tail.text(last_bytes=2) == "ij"


@given(
    line_bytes=st.integers(min_value=1, max_value=300),
    lines=st.integers(min_value=0, max_value=400),
    tail=st.binary(max_size=50),
)
def test_counting_newlines_agrees_with_bytes_count(
    line_bytes: int, lines: int, tail: bytes
) -> None:
    # Long enough that both ways of counting are taken, for short and long lines.
    data = (b"x" * (line_bytes - 1) + b"\n") * lines + tail
    assert count_newlines(data) == data.count(b"\n")


@given(data=st.lists(st.sampled_from([b"x", b"\n", b"\r", b"\r\n", b"x" * 300]), max_size=80))
def test_counting_newlines_agrees_with_bytes_count_wherever_the_newlines_are(
    data: list[bytes],
) -> None:
    # Dense at the start and sparse after it, or the other way round: the sample
    # at the start picks the way of counting, and either way must be exact.
    joined = b"".join(data)
    assert count_newlines(joined) == joined.count(b"\n")


@pytest.mark.parametrize("size", [1, 255, 256, 257, 4096, 8192, 16384, 262144])
@pytest.mark.parametrize("head", [b"", b"\n" * 300, b"ab\r\n" * 100])
def test_counting_newlines_around_the_sample_size(size: int, head: bytes) -> None:
    for data in (head + b"x" * size, b"x" * size + head, head + b"x\n" * size):
        assert count_newlines(data) == data.count(b"\n")


@pytest.mark.parametrize("chunk", [1, 255, 256, 257, 8192, 256 * 1024])
def test_a_stream_without_a_newline_is_one_line_whatever_its_chunks(chunk: int) -> None:
    data = b"x" * (600 * 1024 + 3)
    capped = CappedText(cap_bytes=1000, cap_lines=10)
    for start in range(0, len(data), chunk):
        capped.feed(data[start : start + chunk])
    expected = CappedOutput("x" * 1000 + "\n" + TRUNCATION_MARKER, True, len(data), 1)
    assert capped.result() == expected


@given(
    pieces=st.lists(st.sampled_from([b"x" * 97, b"\r\n", b"\n", b"\xc3\xa9", b"\r"]), max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=6000), max_size=8),
)
def test_chunk_boundaries_change_nothing_captured(pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)
    whole, chunked = CappedText(700, 20), CappedText(700, 20)
    whole.feed(data)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    for start, end in zip(bounds, bounds[1:], strict=False):
        chunked.feed(data[start:end])
    assert chunked.result() == whole.result()
    assert whole.result().lines == data.count(b"\n") + (
        0 if data.endswith(b"\n") or not data else 1
    )


def test_memory_stays_flat_for_a_huge_stream_without_a_newline() -> None:
    capped, tail = CappedText(48 * 1024, 600), RollingTail(1024)
    chunk = b"x" * 8192
    tracemalloc.start()
    try:
        for _ in range(6_400):  # 50 MiB, no newline anywhere
            capped.feed(chunk)
            tail.feed(chunk)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, f"{peak} bytes traced while feeding 50 MiB"
    assert capped.result() == CappedOutput(
        "x" * 48 * 1024 + "\n" + TRUNCATION_MARKER, True, 6_400 * 8192, 1
    )
    assert tail.text() == "x" * 1024
