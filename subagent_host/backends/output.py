"""Bounded collection of a child's output: memory stays flat however much it prints.

Two views of one stream (protocol.md §12 "Output"):
- `CappedText`: the first `cap_bytes` / `cap_lines` of the text, for the run's
  result, with the `[output truncated]` marker when it was cut, plus exact
  totals of bytes and lines seen;
- `RollingTail`: the last `limit` bytes, for error reports (stderr tails).
"""

from __future__ import annotations

from typing import Final

import attrs

TRUNCATION_MARKER: Final = "[output truncated]"
TAIL_LIMIT_BYTES: Final = 512 * 1024


@attrs.frozen
class CappedOutput:
    """What a snapshot shows of an output: the kept text and how much there was."""

    text: str
    truncated: bool
    bytes: int
    lines: int


class StreamSize:
    """Counts a byte stream's bytes and lines, keeping none of it."""

    def __init__(self) -> None:
        self.total_bytes = 0
        self.total_newlines = 0
        self._last_byte = b""

    def feed(self, data: bytes) -> None:
        if data:
            self.total_bytes += len(data)
            self.total_newlines += count_newlines(data)
            self._last_byte = data[-1:]

    @property
    def lines(self) -> int:
        """Lines seen: newlines, plus one for a last line without its newline."""
        return self.total_newlines + (1 if self._last_byte not in (b"", b"\n") else 0)

    def then(self, later: StreamSize) -> StreamSize:
        """The size of this stream followed by `later`."""
        both = StreamSize()
        both.total_bytes = self.total_bytes + later.total_bytes
        both.total_newlines = self.total_newlines + later.total_newlines
        both._last_byte = later._last_byte or self._last_byte
        return both


class CappedText(StreamSize):
    """Keeps the head of a byte stream up to a byte and a line cap; counts all of it."""

    def __init__(self, cap_bytes: int, cap_lines: int) -> None:
        super().__init__()
        self._cap_bytes = cap_bytes
        self._cap_lines = cap_lines
        self._kept = bytearray()
        self._kept_lines = 0
        self._full = False

    @property
    def full(self) -> bool:
        """Whether it keeps nothing more: what follows is only counted."""
        return self._full

    def feed(self, data: bytes) -> None:
        if not data:
            return
        super().feed(data)
        if self._full:
            return
        room = self._cap_bytes - len(self._kept)
        piece = data[:room]
        # Stop at the line cap: keep up to and including the cap_lines-th newline.
        newlines_left = self._cap_lines - self._kept_lines
        cut = _index_of_nth(piece, b"\n", newlines_left)
        if cut is not None:
            piece = piece[: cut + 1]
        self._kept += piece
        self._kept_lines += piece.count(b"\n")
        if len(piece) < len(data):
            self._full = True

    def result(self) -> CappedOutput:
        text = _decode_head(bytes(self._kept))
        truncated = self.total_bytes > len(self._kept)
        if truncated:
            text = text + ("" if text.endswith("\n") or not text else "\n") + TRUNCATION_MARKER
        return CappedOutput(
            text=text, truncated=truncated, bytes=self.total_bytes, lines=self.lines
        )


class RollingTail:
    """Keeps the last `limit` bytes of a stream."""

    def __init__(self, limit: int = TAIL_LIMIT_BYTES) -> None:
        self._limit = limit
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data[-self._limit :]
        overflow = len(self._buffer) - self._limit
        if overflow > 0:
            del self._buffer[:overflow]

    def text(self, last_bytes: int | None = None) -> str:
        data = self._buffer if last_bytes is None else self._buffer[-last_bytes:]
        return bytes(data).decode("utf-8", "replace")


def cap_text(text: str, cap_bytes: int, cap_lines: int) -> CappedOutput:
    """Cap an already complete text the same way a stream is capped."""
    capped = CappedText(cap_bytes, cap_lines)
    capped.feed(text.encode("utf-8"))
    return capped.result()


def count_newlines(data: bytes) -> int:
    """`data.count(b"\\n")`, several times faster on output with ordinary lines or none.

    `bytes.count` of one byte is a plain byte loop; deleting the newlines goes
    through memchr and memcpy and wins unless lines are very short, so a sample
    at the start of the chunk picks the way. The sample is small so that small
    chunks take the fast way too: a child writing 8 KiB at a time (`tr`, `sed`,
    most coreutils) is read in chunks that small, which were counted byte by
    byte: 7 times slower than now without newlines, 4 times with lines of 1 KiB.
    """
    sample = data.count(b"\n", 0, _COUNT_SAMPLE_BYTES)
    if len(data) <= _COUNT_SAMPLE_BYTES:
        return sample
    if sample > _COUNT_SAMPLE_BYTES // _SHORT_LINE_BYTES:
        return sample + data.count(b"\n", _COUNT_SAMPLE_BYTES)
    return len(data) - len(data.replace(b"\n", b""))


# How much of a chunk `count_newlines` looks at, and the line length under which
# deleting newlines stops paying (measured: equal at about 20 bytes a line).
_COUNT_SAMPLE_BYTES: Final = 256
_SHORT_LINE_BYTES: Final = 32


def _decode_head(data: bytes) -> str:
    """Decode, dropping a multi-byte character that the cap cut in two."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data":
            return data[: exc.start].decode("utf-8", "replace")
        return data.decode("utf-8", "replace")


def _index_of_nth(data: bytes, needle: bytes, n: int) -> int | None:
    """Index of the n-th occurrence of `needle` (n >= 1), or None if there are fewer."""
    if n <= 0:
        return -1
    index = -1
    for _ in range(n):
        index = data.find(needle, index + 1)
        if index < 0:
            return None
    return index
