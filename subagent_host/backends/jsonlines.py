"""One JSON event per line, read tolerantly from an agent CLI's stdout.

Chunks arrive split anywhere; lines are reassembled, each bounded (a line
longer than `MAX_LINE_BYTES` is dropped whole, and counted), parsed as JSON;
anything that is not a JSON object is kept as text, like stderr, for error
reports. Lone surrogates (`"\\ud800"` escapes) in an event become U+FFFD
here. Unknown event types are the parser's business: they are ignored there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar, Final

from subagent_host.backends.base import ParsedOutcome
from subagent_host.backends.events import AgentEvent, NormalizedEvents
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.lone_surrogates import SURROGATE_ESCAPE, mend_tree
from subagent_host.backends.output import RollingTail
from subagent_host.backends.reports import (
    STDERR_TAIL_BYTES,
    error_data,
    short,
    stderr_reason,
    with_reason,
)
from subagent_host.values.facts import Usage

MAX_LINE_BYTES: Final = 8 * 1024 * 1024
# How much of a CLI's retry reason an activity line and an error message quote.
RETRY_REASON_CHARS: Final = 300


class Lines:
    """Lines of a stream that arrives in chunks split anywhere, each bounded: a line
    longer than `max_line_bytes` is dropped whole, and counted."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._max = max_line_bytes
        self._partial = bytearray()
        self._skipping = False  # inside a line that was already too long
        self.dropped_lines = 0

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The lines completed by `data` (without their newline), in order."""
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            piece = data[start:end]
            start = end + 1
            if self._skipping:
                self._skipping = False
                self._partial.clear()
                continue
            if self._partial:
                self._partial += piece
                piece = bytes(self._partial)
                self._partial.clear()
            if len(piece) > self._max:  # whole in one chunk, or its last piece made it so
                self.dropped_lines += 1
                continue
            yield piece
        rest = data[start:]
        if rest and not self._skipping:
            self._partial += rest
            if len(self._partial) > self._max:
                self._partial.clear()
                self._skipping = True
                self.dropped_lines += 1

    def finish(self) -> bytes | None:
        """The last line, if the stream did not end with a newline."""
        if not self._partial or self._skipping:
            return None
        line = bytes(self._partial)
        self._partial.clear()
        return line


class JsonLines:
    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._lines = Lines(max_line_bytes)
        self.text = RollingTail()
        """Output lines that were not JSON objects."""

    @property
    def dropped_lines(self) -> int:
        return self._lines.dropped_lines

    def feed(self, data: bytes) -> Iterator[dict[str, Any]]:
        """The JSON objects completed by `data`, in order."""
        for line in self._lines.feed(data):
            event = self._parse(line)
            if event is not None:
                yield event

    def finish(self) -> Iterator[dict[str, Any]]:
        """The last line, if the output did not end with a newline."""
        line = self._lines.finish()
        if line is not None:
            event = self._parse(line)
            if event is not None:
                yield event

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        if not line.strip():
            return None
        event = json_object(line)
        if event is None:
            self.text.feed(line + b"\n")
        return event


def json_object(line: bytes) -> dict[str, Any] | None:
    """The JSON object one line holds (lone surrogates mended), or None when it holds
    something else: not JSON, or JSON that is not an object."""
    stripped = line.strip()
    try:
        event = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    if not isinstance(event, dict):
        return None
    if SURROGATE_ESCAPE.search(stripped) is not None:
        mend_tree(event)  # no lone surrogate goes further than this
    return event


class JsonEventParser:
    """What every agent CLI's parser shares: JSON events read from stdout, a tail of
    stderr, activity lines and normalized events waiting to be reported, the tools
    running now, and the model responses begun (each CLI says in its own way where
    one begins).

    A subclass handles each event in `_on_event` and tells its usage so far (`usage`),
    which is reported when it changed, at most once per chunk of output.

    A subclass also says when the CLI retries a request the model did not answer
    (`_retrying`) and when the model answered (`_answered`): while it retries, its
    output is not progress (the stall timer runs on) and `retrying` is the CLI's own
    reason, which ends the child when it stalls (protocol.md §8.1).
    """

    program: ClassVar[str]
    """The CLI's backend id (`pi`): its rule for the line of stderr that says why it
    failed is looked up by it (`reports.stderr_reason`)."""

    def __init__(self, *, whole_blocks: bool = False) -> None:
        self._lines = JsonLines()
        self._stderr = RollingTail()
        self._pending_activity: list[str] = []
        self._events = NormalizedEvents(whole_blocks=whole_blocks)
        self._tools_running: set[str] = set()
        """Ids of tool calls started and not yet ended."""
        self._turns = 0
        self._retry_reason: str | None = None
        self._retry_told: str | None = None  # the last reason an activity line told
        self._retries_spent = False

    @property
    def retrying(self) -> str | None:
        """The CLI's reason while it retries a request its model did not answer (it has
        not answered since); None otherwise."""
        return self._retry_reason

    @property
    def retries_spent(self) -> bool:
        """The CLI said it made the last retry its budget allows (codex's `5/5`) and its
        model has not answered since: it should give up now."""
        return self._retries_spent

    def _retrying(self, reason: str, *, spent: bool = False) -> None:
        """The CLI retries, and says why: one activity line per new reason, not per notice."""
        reason = short(reason, RETRY_REASON_CHARS)
        self._retry_reason = reason
        self._retries_spent = spent
        if reason != self._retry_told:
            self._retry_told = reason
            self._pending_activity.append(f"reconnecting to the model ({reason})")

    def _answered(self) -> None:
        """The model answered: the retries are over."""
        self._retry_reason = self._retry_told = None
        self._retries_spent = False

    @property
    def turns(self) -> int:
        """Model responses begun so far (see each subclass for what marks one)."""
        return self._turns

    def on_stdout(self, data: bytes) -> None:
        for event in self._lines.feed(data):
            self._on_event(event)

    def on_event(self, event: dict[str, Any]) -> None:
        """One event its caller read from a line itself (an interactive conversation,
        which owns the CLI's stdout lines, backends/interactive/)."""
        self._on_event(event)

    def on_stderr(self, data: bytes) -> None:
        self._stderr.feed(data)

    def activity(self) -> list[str]:
        pending, self._pending_activity = self._pending_activity, []
        return pending

    def events(self) -> list[AgentEvent]:
        """The normalized events since the last call, the usage last if it changed."""
        return self._events.drain(self.usage)

    @property
    def usage(self) -> Usage | None:
        raise NotImplementedError

    def outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        """The child's outcome once it exited (a last line without a newline read first)."""
        for event in self._lines.finish():
            self._on_event(event)
        return self._outcome(exit_status)

    def _failed(
        self, answer: ParsedOutcome, code: str, message: str, exit_status: ProcessExit
    ) -> ParsedOutcome:
        """The answer as a failure, its data the exit, the stderr tail and dropped lines."""
        tail = self._stderr.text(STDERR_TAIL_BYTES)
        return answer.failed(
            code, message, error_data(exit_status, tail, self._lines.dropped_lines)
        )

    def _with_stderr_reason(self, message: str) -> str:
        """`message` and the line of stderr that says why, by this CLI's rule
        (`reports.stderr_reason`, which `watch` uses too)."""
        tail = self._stderr.text(STDERR_TAIL_BYTES)
        return with_reason(message, stderr_reason(self.program, tail))

    def _on_event(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def _outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        raise NotImplementedError
