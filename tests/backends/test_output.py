"""Capped output and rolling tails: exact totals, bounded memory, honest markers."""

from __future__ import annotations

import random

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
