"""An agent CLI's stdout read as JSON lines: whatever the chunks, long lines and no newlines."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from subagent_host.backends.jsonlines import JsonLines

LIMIT = 1000


def read(reader: JsonLines, data: bytes, chunk: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for start in range(0, len(data), chunk):
        events += reader.feed(data[start : start + chunk])
    return events + list(reader.finish())


def event_of(size: int) -> bytes:
    """One JSON event of exactly `size` bytes, its newline not counted."""
    head = b'{"pad":"'
    return head + b"y" * (size - len(head) - 2) + b'"}'


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 999, 1000, 1001, 1 << 20])
def test_lines_split_anywhere_are_read_the_same(chunk: int) -> None:
    data = b'{"a":1}\n{"b":2}\r\nnot json\n\n{"c":3}'  # CRLF, text, a last line open
    reader = JsonLines(LIMIT)
    assert read(reader, data, chunk) == [{"a": 1}, {"b": 2}, {"c": 3}]
    assert reader.dropped_lines == 0 and reader.text.text() == "not json\n"


@pytest.mark.parametrize("chunk", [1, 7, 500, 1 << 20])
def test_a_line_at_the_limit_is_read_and_one_byte_longer_is_dropped_once(chunk: int) -> None:
    at_limit, over = event_of(LIMIT), event_of(LIMIT + 1)
    reader = JsonLines(LIMIT)
    data = at_limit + b"\n" + over + b"\n" + b'{"after":1}\n' + over  # the last one left open
    assert read(reader, data, chunk) == [{"pad": "y" * (LIMIT - 10)}, {"after": 1}]
    assert reader.dropped_lines == 2


@pytest.mark.parametrize("chunk", [8 * 1024, 256 * 1024])
def test_an_endless_line_is_dropped_once_and_memory_stays_flat(chunk: int) -> None:
    reader = JsonLines(64 * 1024)
    piece = b"x" * chunk
    tracemalloc.start()
    try:
        for _ in range(50 * 1024 * 1024 // chunk):  # 50 MiB without a newline
            assert list(reader.feed(piece)) == []
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 + chunk + 64 * 1024, f"{peak} bytes traced for an endless line"
    assert reader.dropped_lines == 1
    # The line ends; what follows is read as before.
    assert list(reader.feed(b"xx\n" + b'{"next":1}\n')) == [{"next": 1}]
    assert list(reader.finish()) == [] and reader.dropped_lines == 1
