"""Bytes to JSON values and back, for both framings of protocol.md §2.

Decoders are push parsers: `feed()` takes whatever bytes arrived (one byte or a
megabyte) and returns the frames completed so far; `finish()` is called once at
end of input. They enforce the message-size limit without ever buffering more
than the limit, and turn every malformed input into a `BadFrame` the dispatcher
answers, so nothing a client sends can stop the read loop. They know no method
names.
"""

from __future__ import annotations

import enum
import re
from typing import Any, Final, Literal

import attrs

from subagent_host.rpc.json_codec import JsonDecodeError, decode_json
from subagent_host.values import Framing

NEWLINE: Final = b"\n"
WHITESPACE: Final = b" \t\r\n"
BOM: Final = b"\xef\xbb\xbf"
# A header block larger than this is not LSP framing; stop looking for its end.
MAX_HEADER_BYTES: Final = 8 * 1024
# More digits than any sane length (and than int() should be asked to parse).
MAX_LENGTH_DIGITS: Final = 20
# Lines that may begin a header block, where a lost decoder picks up again.
RESYNC_PREFIXES: Final = (b"content-length:", b"content-type:")
RESYNC_PREFIX_BYTES: Final = max(map(len, RESYNC_PREFIXES))
# What nearly every client sends; parsed in one regex match.
CANONICAL_HEADER: Final = re.compile(rb"Content-Length: ?(\d{1,20})\r\n\r\n")
# `name: value` with an RFC 9110 token as the name.
HEADER_LINE: Final = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[^\r\n]*")


@attrs.frozen
class Parsed:
    """One complete message, parsed as strict JSON."""

    value: Any


@attrs.frozen
class BadFrame:
    """Input that is not a message: answered with `id: null` and skipped."""

    kind: Literal["parse-error", "too-large"]
    message: str


Frame = Parsed | BadFrame


def parse_body(body: bytes) -> Frame:
    """Parse one message body as strict JSON."""
    try:
        return Parsed(decode_json(body))
    except JsonDecodeError as exc:
        return BadFrame("parse-error", f"parse error: {exc}")


def too_large(limit: int, size: int | None = None) -> BadFrame:
    """The answer to a message over the limit; `size` when the framing told it."""
    told = f"{size} bytes" if size is not None else f"more than {limit} bytes"
    return BadFrame("too-large", f"message too large: {told} (the limit is {limit} bytes)")


def encode_frame(body: bytes, framing: Framing) -> bytes:
    """Frame one serialized JSON text for the wire."""
    if framing is Framing.NDJSON:
        return body + NEWLINE  # JSON text never holds a raw newline, so this is unambiguous
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


NDJSON_HINT: Final = (
    "; NDJSON framing reads one JSON text per line: a message spread over several lines"
    " (pretty-printed) is read line by line, and no line parses alone. Send each message on"
    " one line (compact JSON), or use LSP framing (Content-Length headers)"
)


def _a_piece_of_json(line: bytes) -> bool:
    """Whether a line that does not parse looks like one line of a JSON text written over
    several (`{`, `"id": 1,`, `}`), rather than a whole text that is wrong."""
    return line[-1:] in (b"{", b"[", b",", b":") or line[:1] in (b"}", b"]", b'"')


class NdjsonDecoder:
    """One JSON text per line; blank lines are ignored, a trailing `\\r` is tolerated."""

    def __init__(self, max_message_bytes: int) -> None:
        self._limit = max_message_bytes
        # The first line that reads as a piece of a longer JSON text is told what NDJSON
        # is, once per connection: pretty-printed JSON gives one error per line, and the
        # first says why.
        self._hinted = False
        self._partial = bytearray()
        self._discarding = False  # inside a line already reported as too large

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        newline = data.find(NEWLINE)
        if newline < 0:
            self._extend_partial(data, frames)
            return frames
        self._extend_partial(data[:newline], frames)
        self._end_line(bytes(self._partial), frames)
        self._partial.clear()
        lines = data[newline + 1 :].split(NEWLINE)
        for line in lines[:-1]:
            self._end_line(line, frames)
        self._extend_partial(lines[-1], frames)
        return frames

    def finish(self) -> list[Frame]:
        frames: list[Frame] = []
        self._end_line(bytes(self._partial), frames)  # a last line need not end in "\n"
        self._partial.clear()
        return frames

    def _extend_partial(self, data: bytes, frames: list[Frame]) -> None:
        if self._discarding or not data:
            return
        if len(self._partial) + len(data) > self._limit:
            frames.append(too_large(self._limit))
            self._partial.clear()
            self._discarding = True
            return
        self._partial += data

    def _end_line(self, line: bytes, frames: list[Frame]) -> None:
        if self._discarding:
            self._discarding = False
            return
        line = line.strip(WHITESPACE)
        if not line:
            return
        if len(line) > self._limit:
            frames.append(too_large(self._limit, len(line)))
            return
        frame = parse_body(line)
        if isinstance(frame, BadFrame) and not self._hinted and _a_piece_of_json(line):
            self._hinted = True
            frame = BadFrame(frame.kind, frame.message + NDJSON_HINT)
        frames.append(frame)


class _LspState(enum.Enum):
    HEADERS = enum.auto()
    BODY = enum.auto()
    SKIP = enum.auto()  # discarding a body whose length is known
    RESYNC = enum.auto()  # discarding until a line that can start a header block


DETECTED_LSP_HINT: Final = (
    "; framing was detected as LSP (Content-Length headers) from the first byte, which was"
    " not '{' or '[': for one JSON text per line, start with a JSON object or run"
    " with --framing ndjson"
)


class LspDecoder:
    """LSP base protocol: `Content-Length: N` (and optional `Content-Type`), blank line, body.

    Header lines may end in `\\r\\n` or a bare `\\n`. A header block that cannot be
    trusted (missing, non-numeric or conflicting Content-Length, oversized headers)
    is reported, and the decoder skips ahead to the next line that starts a header
    block (`Content-Length:` or `Content-Type:`), the way clangd recovers from a
    wrong length. Headers are held to MAX_HEADER_BYTES like a body to the message
    limit: a line that runs past it, ended or not, is reported once and skipped
    without being stored.
    """

    def __init__(self, max_message_bytes: int, *, detected: bool = False) -> None:
        self._limit = max_message_bytes
        # Chosen by AutoDecoder from a first byte that was not `{` or `[`: a person who
        # typed a stray line first is told why their JSON lines are not read, until a
        # real header line shows that LSP was meant.
        self._hint = DETECTED_LSP_HINT if detected else ""
        self._state = _LspState.HEADERS
        self._buffer = bytearray()
        self._headers: list[bytes] = []
        self._header_bytes = 0
        self._remaining = 0  # BODY: the body's length; SKIP: bytes still to drop
        self._at_line_start = True  # RESYNC: is the buffer's first byte a line's first?

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        self._buffer += data
        while self._take_canonical(frames) or self._step(frames):
            pass
        return frames

    def _take_canonical(self, frames: list[Frame]) -> bool:
        """Fast path: a whole message with the usual single header, ready in the buffer."""
        if self._state is not _LspState.HEADERS or self._headers:
            return False
        match = CANONICAL_HEADER.match(self._buffer)
        if match is None:
            return False
        size, start = int(match[1]), match.end()
        if size > self._limit or len(self._buffer) - start < size:
            return False  # the general path reports it, or waits for the rest
        frames.append(parse_body(bytes(self._buffer[start : start + size])))
        del self._buffer[: start + size]
        return True

    def finish(self) -> list[Frame]:
        if self._state is _LspState.BODY:
            return [
                BadFrame(
                    "parse-error",
                    "parse error: input ended inside a message body "
                    f"({len(self._buffer)} of {self._remaining} bytes)",
                )
            ]
        if self._state is _LspState.HEADERS and (self._headers or self._buffer.strip(WHITESPACE)):
            return [BadFrame("parse-error", "parse error: input ended inside a header block")]
        return []

    def _step(self, frames: list[Frame]) -> bool:
        """Consume what the buffer allows in the current state; False when more input is needed."""
        if self._state is _LspState.HEADERS:
            return self._read_header_line(frames)
        if self._state is _LspState.BODY:
            if len(self._buffer) < self._remaining:
                return False
            body = bytes(self._buffer[: self._remaining])
            del self._buffer[: self._remaining]
            self._state = _LspState.HEADERS
            frames.append(parse_body(body))
            return True
        if self._state is _LspState.SKIP:
            taken = min(self._remaining, len(self._buffer))
            del self._buffer[:taken]
            self._remaining -= taken
            if self._remaining:
                return False
            self._state = _LspState.HEADERS
            return True
        return self._resync()

    def _read_header_line(self, frames: list[Frame]) -> bool:
        end = self._buffer.find(NEWLINE)
        if end < 0:
            if self._header_bytes + len(self._buffer) > MAX_HEADER_BYTES:
                # An unterminated line: reported once, and what is held of it dropped
                # (the buffer holds nothing but that line). Its rest is skipped as it
                # arrives, never scanned again from its start: a line beginning
                # `Content-Length:` would otherwise be taken up by the resync again and
                # again, one report and one growing rescan per read.
                self._fail(frames, "header block is too large")
                self._buffer.clear()
                self._at_line_start = False
            return False
        line = bytes(self._buffer[:end]).rstrip(b"\r")
        del self._buffer[: end + 1]
        self._header_bytes += end + 1
        if not line.strip(WHITESPACE):
            if self._headers:
                self._end_headers(frames)
            else:
                self._header_bytes = 0  # blank lines between messages are harmless
            return True
        if HEADER_LINE.fullmatch(line) is None:
            self._fail(frames, f"malformed header line {_show(line)}{self._hint}")
        elif self._header_bytes > MAX_HEADER_BYTES:
            self._fail(frames, "header block is too large")
        else:
            self._headers.append(line)
            self._hint = ""  # a real header: LSP it is
        return True

    def _end_headers(self, frames: list[Frame]) -> None:
        lengths: list[bytes] = []
        problem: str | None = None
        for line in self._headers:
            name, _, value = line.partition(b":")
            name = name.lower()
            if name == b"content-length":
                lengths.append(value.strip())
            elif name == b"content-type":
                problem = problem or _check_content_type(value)
        self._headers = []
        self._header_bytes = 0
        if not lengths:
            self._fail(frames, "missing Content-Length header")
            return
        bad = [raw for raw in lengths if not _is_length(raw)]
        if bad:
            self._fail(frames, f"Content-Length {_show(bad[0])} is not a number")
            return
        sizes = {int(raw) for raw in lengths}
        if len(sizes) > 1:
            self._fail(frames, "conflicting Content-Length headers")
            return
        (size,) = sizes
        if len(lengths) > 1:
            problem = problem or "duplicate Content-Length header"
        if problem is not None:
            # The length is still known, so skip exactly that body and stay in step.
            frames.append(BadFrame("parse-error", f"parse error: {problem}"))
            self._skip(size)
        elif size > self._limit:
            frames.append(too_large(self._limit, size))
            self._skip(size)  # counted, never allocated
        else:
            self._state = _LspState.BODY
            self._remaining = size

    def _fail(self, frames: list[Frame], problem: str) -> None:
        """Report a header block that cannot be trusted and look for the next one."""
        frames.append(BadFrame("parse-error", f"parse error: {problem}"))
        self._headers = []
        self._header_bytes = 0
        self._state = _LspState.RESYNC
        self._at_line_start = True

    def _skip(self, size: int) -> None:
        self._state = _LspState.SKIP
        self._remaining = size

    def _resync(self) -> bool:
        """Drop whole lines until one that can start a header block."""
        while True:
            if self._at_line_start:
                head = bytes(self._buffer[:RESYNC_PREFIX_BYTES]).lower()
                if head.startswith(RESYNC_PREFIXES):
                    self._state = _LspState.HEADERS
                    return True
                if len(head) < RESYNC_PREFIX_BYTES and NEWLINE not in head:
                    return False  # too short to tell yet
            end = self._buffer.find(NEWLINE)
            if end < 0:
                self._buffer.clear()
                self._at_line_start = False
                return False
            del self._buffer[: end + 1]
            self._at_line_start = True


def _is_length(raw: bytes) -> bool:
    return raw.isdigit() and len(raw) <= MAX_LENGTH_DIGITS


def _check_content_type(value: bytes) -> str | None:
    for parameter in value.split(b";")[1:]:
        key, _, charset = parameter.partition(b"=")
        if key.strip().lower() == b"charset" and charset.strip(b" \"'").lower() not in (
            b"utf-8",
            b"utf8",
        ):
            return f"unsupported charset {_show(charset.strip())} (only utf-8)"
    return None


def _show(raw: bytes) -> str:
    return repr(raw[:40].decode("utf-8", "replace"))


class AutoDecoder:
    """Pick the framing from the first non-whitespace byte: `{` or `[` is NDJSON, else LSP.

    A UTF-8 byte-order mark before that byte is dropped, not taken for LSP.
    """

    def __init__(self, max_message_bytes: int, forced: Framing | None = None) -> None:
        self._limit = max_message_bytes
        self._inner: NdjsonDecoder | LspDecoder | None = None
        self._head = b""  # leading bytes seen before the framing is known
        self.framing: Framing | None = None
        if forced is not None:
            self._choose(forced)

    def feed(self, data: bytes) -> list[Frame]:
        if self._inner is None:
            data = self._detect(data)
            if self._inner is None:
                return []
        assert self._inner is not None
        return self._inner.feed(data)

    def _detect(self, data: bytes) -> bytes:
        """Consume leading whitespace and BOMs; choose once a telling byte arrives."""
        head = (self._head + data).lstrip(WHITESPACE)
        while head.startswith(BOM):
            head = head[len(BOM) :].lstrip(WHITESPACE)
        if not head or BOM.startswith(head):
            self._head = head  # nothing telling yet (or a BOM cut in two)
            return b""
        self._head = b""
        self._choose(Framing.NDJSON if head[:1] in (b"{", b"[") else Framing.LSP, detected=True)
        return head

    def finish(self) -> list[Frame]:
        return self._inner.finish() if self._inner is not None else []

    def _choose(self, framing: Framing, *, detected: bool = False) -> None:
        self.framing = framing
        self._inner = (
            NdjsonDecoder(self._limit)
            if framing is Framing.NDJSON
            else LspDecoder(self._limit, detected=detected)
        )
