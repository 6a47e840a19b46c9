"""Redaction of a child's output: secrets it was given, and long base64-like runs.

Everything a child says enters the server through its sink (runs/child_sink.py),
which passes each stream through a `StreamRedactor` before anything reads it:
the output parser (final text, stderr tails, an agent's events), the streamed
`output` and `stderr` events, the store and the logs all see redacted text. protocol.md §12.1
is the rule; here is how it is kept.

- Secrets: the values of the child's environment variables whose names contain
  KEY, TOKEN, SECRET or PASSWORD (any case), when at least `MIN_SECRET_CHARS`
  characters long (shorter values, `1`, `true`, `dev`, would hit ordinary text).
  Always on.
- Base64: a run of at least `MIN_RUN_CHARS` characters of `A-Z a-z 0-9 + / = - _`
  (the standard and the URL-safe alphabet, padding included), delimited by any
  other byte. On unless the request says `redact: false`.

Each is replaced by `[redacted: N bytes]`, N the UTF-8 bytes replaced. Secrets
are replaced first (so a secret inside a long run goes even with the base64 rule
off), then runs.

A stream arrives in chunks split anywhere, so a redactor holds back the end of
what it was fed that could still become a match: the longest suffix that is the
start of a secret (fewer bytes than the longest secret), and a trailing run
shorter than `MIN_RUN_CHARS` (at most 199 bytes). A run already long enough is
not kept at all: its bytes are counted while it lasts, and its marker goes out
when it ends (or the stream does), so memory stays flat however long it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import attrs

from subagent_host.backends.base import ParsedOutcome

MIN_RUN_CHARS: Final = 200
"""The shortest base64-like run that is redacted."""
MIN_SECRET_CHARS: Final = 8
"""The shortest environment value taken for a secret (shorter ones are too common)."""
SECRET_NAME: Final = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
"""An environment variable whose name matches this holds a secret."""
BASE64_ALPHABET: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_"

# Every byte of the alphabet becomes `_IN`, every other one `_OUT`: runs are then
# found with `bytes.find`, in C, whatever the output looks like.
_IN: Final = b"A"
_OUT: Final = b"\0"
_CLASSES: Final = bytes(_IN[0] if byte in BASE64_ALPHABET else _OUT[0] for byte in range(256))
_LONG_RUN: Final = _IN * MIN_RUN_CHARS
# A quick look first: every 7th byte (7 shares no factor with the widths of most
# repeated patterns). A long run holds at least 200 // 7 = 28 consecutive of them;
# without such a streak the chunk has no long run, and only its last 200 bytes are
# looked at whole. Measured on 256 KiB of text: a third of the time of a whole look
# (translate and find); text of long words may show streaks, and is looked at whole.
_STRIDE: Final = 7
_SAMPLED_RUN: Final = _IN * (MIN_RUN_CHARS // _STRIDE)
_SAMPLE_FROM: Final = 4 * 1024
"""Smaller chunks are looked at whole at once."""


def marker(size: int) -> bytes:
    """What replaces `size` bytes."""
    return b"[redacted: %d bytes]" % size


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of `env` that are secrets, longest first (a longer one containing a
    shorter one is replaced whole)."""
    values = {
        value
        for name, value in env.items()
        if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_CHARS
    }
    return tuple(sorted(values, key=lambda value: (-len(value), value)))


@attrs.frozen
class Redaction:
    """What one child's output is redacted of."""

    secrets: tuple[bytes, ...] = ()
    """Secret values (UTF-8), longest first."""
    base64: bool = True
    """Whether long base64-like runs are redacted (`redact: false` turns this off)."""

    @classmethod
    def of(cls, env: Mapping[str, str], *, base64: bool = True) -> Redaction:
        """The redaction of a child launched with `env`."""
        return cls(tuple(value.encode("utf-8") for value in secret_values(env)), base64)

    @property
    def active(self) -> bool:
        return bool(self.secrets) or self.base64

    def text(self, text: str) -> str:
        """`text` redacted whole (a tool summary, an activity line, a final text)."""
        if not self.active or not text:
            return text
        redactor = StreamRedactor(self)
        data = text.encode("utf-8", "surrogatepass")
        done = redactor.feed(data) + redactor.finish()
        return text if done == data else done.decode("utf-8", "replace")

    def outcome(self, outcome: ParsedOutcome) -> ParsedOutcome:
        """A finished child's outcome with its texts redacted: the final text (its size
        and lines follow), the error's message and the texts of its data."""
        text = self.text(outcome.final_text)
        data = outcome.error_data
        return attrs.evolve(
            outcome,
            final_text=text,
            final_bytes=outcome.final_bytes - _size(outcome.final_text) + _size(text),
            final_lines=outcome.final_lines - outcome.final_text.count("\n") + text.count("\n"),
            error_message=None
            if outcome.error_message is None
            else self.text(outcome.error_message),
            error_data=None
            if data is None
            else {k: self.text(v) if isinstance(v, str) else v for k, v in data.items()},
            stderr_tail=None if outcome.stderr_tail is None else self.text(outcome.stderr_tail),
        )


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


NOTHING: Final = Redaction(base64=False)
"""No redaction (what a sink without a redaction of its own does)."""


class StreamRedactor:
    """Redacts one stream fed in chunks: each `feed` returns what can be passed on
    now, `finish` the rest once the stream ended."""

    def __init__(self, redaction: Redaction) -> None:
        self._secrets = redaction.secrets
        self._base64 = redaction.base64
        self._held = b""
        """The end of what was fed that may still be part of a match."""
        self._open_run = 0
        """Bytes of a run long enough to redact that has not ended yet (dropped)."""

    def feed(self, data: bytes) -> bytes:
        if not data:
            return b""
        return self._redact(self._held + data if self._held else data, final=False)

    def finish(self) -> bytes:
        """What is still held, now that nothing more follows."""
        held, self._held = self._held, b""
        return self._redact(held, final=True) if held or self._open_run else b""

    def _redact(self, buffer: bytes, *, final: bool) -> bytes:
        for secret in self._secrets:
            if secret in buffer:
                buffer = buffer.replace(secret, marker(len(secret)))
        # The longest end that begins a secret is held whatever else happens: no
        # other secret begins before it without being complete (and replaced).
        keep = 0 if final or not self._secrets else _secret_start(buffer, self._secrets)
        body, tail = (
            (buffer[: len(buffer) - keep], buffer[len(buffer) - keep :]) if keep else (buffer, b"")
        )
        out = b""
        if self._open_run:
            run = _leading_run(body)
            if run == len(body) and not final:
                self._open_run += run
                self._held = tail
                return b""
            out, body = marker(self._open_run + run), body[run:]
            self._open_run = 0
        short = b""
        if self._base64:
            body, short = self._runs(body, final=final)
        self._held = short + tail
        return out + body if out else body

    def _runs(self, body: bytes, *, final: bool) -> tuple[bytes, bytes]:
        """`body` with its complete long runs replaced, and its end to hold back: a
        trailing run that may still grow into a long one. A long run reaching the end
        is cut off and counted in `_open_run`, unless the stream ended."""
        if len(body) >= _SAMPLE_FROM and _SAMPLED_RUN not in body[::_STRIDE].translate(_CLASSES):
            # No long run; a trailing run is shorter than MIN_RUN_CHARS.
            end = len(body) - MIN_RUN_CHARS
            cut = len(body) if final else end + body[end:].translate(_CLASSES).rfind(_OUT) + 1
            return body[:cut], body[cut:]
        classes = body.translate(_CLASSES)
        start = classes.find(_LONG_RUN)
        cut = len(body) if final else classes.rfind(_OUT) + 1
        if start < 0:  # no long run: hold the trailing run, if any
            return body[:cut], body[cut:]
        pieces = []
        done = 0
        while start >= 0:
            end = classes.find(_OUT, start + MIN_RUN_CHARS)
            pieces.append(body[done:start])
            if end < 0:  # the run reaches the end: it may go on
                if final:
                    pieces.append(marker(len(body) - start))
                else:
                    self._open_run = len(body) - start
                return b"".join(pieces), b""
            pieces.append(marker(end - start))
            done = end
            start = classes.find(_LONG_RUN, end)
        pieces.append(body[done:cut])
        return b"".join(pieces), body[cut:]


def _leading_run(data: bytes) -> int:
    """How many bytes at the start of `data` are of the base64 alphabet."""
    classes = data.translate(_CLASSES)
    end = classes.find(_OUT)
    return len(data) if end < 0 else end


def _secret_start(buffer: bytes, secrets: tuple[bytes, ...]) -> int:
    """The length of the longest suffix of `buffer` that begins a secret."""
    longest = 0
    for secret in secrets:
        position = max(0, len(buffer) - len(secret) + 1)
        first = secret[:1]
        # Only suffixes longer than the longest found so far are looked at.
        while (position := buffer.find(first, position, len(buffer) - longest)) >= 0:
            if secret.startswith(buffer[position:]):
                longest = len(buffer) - position
                break
            position += 1
    return longest
