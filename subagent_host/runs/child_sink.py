"""Take in one child's output: feed its parser, note when it was last active, stream it.

The supervisor hands each chunk of a child's stdout and stderr to its sink. The
sink also watches for a stall: no output (and no agent tool running) for too long.
An agent CLI retrying a request its model did not answer prints notices, but they
are not progress: while the parser says it retries (`retrying`), output does not
restart the stall period, and a stall then is the CLI's failure to reach its model.

After each chunk the sink drains what the parser made of it: the normalized events
of an agent child (`message`, `tool`, `usage`, protocol.md §11), which go out as
`run/event` fields when the run streams and are dropped otherwise, then its activity
lines; the raw chunk goes out as `output` when asked, and each chunk of its stderr then
as `stderr` (the same redaction, the same bounds and the same hold as its stdout).

Every chunk is redacted here first (backends/redaction.py, protocol.md §12.1), before
the parser or anything else sees it: the final text, error tails, events, activity
lines, streamed output, the store and the logs all read from this one place. An agent's
text is redacted once more as the parser decoded it (its JSON may have escaped what the
raw bytes hid), its message pieces as one stream, so a secret split across two deltas
goes too. `outcome` lets go of what the redactors still held before the parser judges
the exit.

Only what is kept or sent is redacted: a command child's stdout, once its parser keeps
no more of it (`keeps_stdout`) and nothing streams it, is only counted (its `bytes` and
`lines`: the redacted head, then the rest as printed), so a drain of 200 MiB costs
about what it did without redaction (bench/runs.py, section 2c).

A streamed child's output goes to the client: while the client's outgoing queue
is full, the `StreamGate` holds every streamed child back (its stdout and stderr are
not read, so it blocks on write as on a slow terminal). Time held back is not a
stall; the child's timeout still runs.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
from collections.abc import Callable
from typing import Final

import attrs

from subagent_host.backends.base import OutputParser, ParsedOutcome
from subagent_host.backends.budgets import Budget
from subagent_host.backends.command import CommandParser
from subagent_host.backends.events import (
    AgentEvent,
    MessageText,
    Phase,
    PlanUpdated,
    ToolEnded,
    ToolStarted,
    UsageSoFar,
)
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.interactive.driven_output import DrivenOutput
from subagent_host.backends.output import StreamSize
from subagent_host.backends.redaction import NOTHING, Redaction, StreamRedactor
from subagent_host.values.choices import ReachedLimit
from subagent_host.values.events import (
    Event,
    MessageEvent,
    OutputEvent,
    PlanEvent,
    StderrEvent,
    ToolEvent,
    UsageEvent,
)

# The events of what a child printed, raw: its stdout and its stderr.
RawEvent = type[OutputEvent] | type[StderrEvent]
RAW_STREAMS: Final[tuple[RawEvent, ...]] = (OutputEvent, StderrEvent)

EventSender = Callable[[AgentEvent], None]
"""Sends one normalized event of a child as a `run/event` (`agent_event` gives it its index)."""
RawSender = Callable[[RawEvent, str], None]
"""Sends what a child printed as it printed it: `OutputEvent` (its stdout) or `StderrEvent`,
and the text."""


class ChildSink:
    """The supervisor's output sink for one child: feeds the parser, notes activity, streams."""

    def __init__(
        self,
        parser: OutputParser,
        stream: RawSender | None,
        report_activity: Callable[[str], None],
        report_event: EventSender | None = None,
        redaction: Redaction = NOTHING,
    ) -> None:
        self.parser = parser
        self._output_first = isinstance(parser, DrivenOutput)
        self._redaction = redaction
        self._redacting = redaction.active
        self._stdout = StreamRedactor(redaction)
        self._stderr = StreamRedactor(redaction)
        self._messages = StreamRedactor(redaction)
        self._message_decoder = codecs.getincrementaldecoder("utf-8")("replace")
        # A command's stdout once nothing keeps or sends it: only its size.
        self._counted: StreamSize | None = None
        self._stream = stream
        self._report_activity = report_activity
        self._report_event = report_event
        self._loop = asyncio.get_running_loop()
        self.last_active = self._loop.time()
        # One per stream: a character split across reads stays whole.
        self._decoders = {
            name: codecs.getincrementaldecoder("utf-8")("replace") for name in RAW_STREAMS
        }
        # Output can arrive before the child is marked running; its events wait.
        self._held: list[Callable[[], None]] | None = []
        self.on_finished: Callable[[], None] | None = None
        """Called once, when the parser has seen the CLI's final event."""
        self.on_retries_spent: Callable[[], None] | None = None
        """Called once, when the CLI said it made its last retry (`retries_spent`)."""
        self._turn_limit: tuple[int, Callable[[], None]] | None = None
        self._budget: tuple[Budget, Callable[[ReachedLimit], None]] | None = None
        self.held = False
        """Its output is not being read: the client is behind (see StreamGate)."""
        self._pause: Callable[[], None] = _nothing
        self._resume: Callable[[], None] = _nothing

    def throttle(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        """How to stop and restart reading the child's stdout (its started process's)."""
        self._pause, self._resume = pause, resume
        if self.held:
            pause()

    def hold(self) -> None:
        if not self.held:
            self.held = True
            self._pause()

    def release(self) -> None:
        if self.held:
            self.held = False
            self.last_active = self._loop.time()  # the stall period starts afresh
            self._resume()

    def open(self) -> None:
        """The child is marked running: send the events held so far, then send at once."""
        held, self._held = self._held or [], None
        for send in held:
            send()

    def _send(self, send: Callable[[], None]) -> None:
        """Send an event now, or once the child is marked running."""
        if self._held is None:
            send()
        else:
            self._held.append(send)

    def on_stdout(self, data: bytes) -> None:
        quiet_since = self.last_active
        self.last_active = self._loop.time()
        if self._counted is not None:
            self._counted.feed(data)
            return
        if self._redacting and self._stream is None and _only_counts(self.parser):
            self.parser.on_stdout(self._stdout.finish())  # what was held is counted too
            self._counted = StreamSize()  # nothing keeps or sends the rest
            self._counted.feed(data)
            return
        self._take_stdout(self._stdout.feed(data) if self._redacting else data)
        if self.retrying is not None:
            # The CLI's retry notices are not progress: its model has not answered.
            self.last_active = quiet_since

    @property
    def retrying(self) -> str | None:
        """The agent CLI's reason while it retries a request its model did not answer."""
        reason = getattr(self.parser, "retrying", None)
        return reason if isinstance(reason, str) else None

    def _take_stdout(self, data: bytes) -> None:
        if self._output_first:
            # A driven command's lines end its turns: what it printed is told before the
            # turn's end it caused.
            self._stream_raw(OutputEvent, data)
        self.parser.on_stdout(data)
        # The chunk's normalized events before its activity lines: a message whose last
        # piece came in the chunk that also starts a tool is whole before `» tool ...`.
        # Drained whether sent or not: they must not pile up.
        self.report_events(self.parser.events())
        for summary in self.parser.activity():
            if self._redacting:
                summary = self._redaction.text(summary)
            self._send(functools.partial(self._report_activity, summary))
        if self.on_finished is not None and self.parser.finished:
            finished, self.on_finished = self.on_finished, None
            finished()
        if self.on_retries_spent is not None and getattr(self.parser, "retries_spent", False):
            spent, self.on_retries_spent = self.on_retries_spent, None
            spent()
        self._check_turns()
        self._check_budget()
        if not self._output_first:
            self._stream_raw(OutputEvent, data)

    def report_events(self, events: list[AgentEvent]) -> None:
        """Send normalized events of the child (redacted) when the run streams them: the
        parser's after each chunk, or a driven child's as its conversation tells them."""
        if self._report_event is not None and events:
            for event in self._redacted(events) if self._redacting else events:
                self._send(functools.partial(self._report_event, event))

    def on_stderr(self, data: bytes) -> None:
        self._take_stderr(self._stderr.feed(data) if self._redacting else data)
        if self.retrying is None:
            self.last_active = self._loop.time()

    def _take_stderr(self, data: bytes) -> None:
        self.parser.on_stderr(data)
        self._stream_raw(StderrEvent, data)

    def _stream_raw(self, event_type: RawEvent, data: bytes) -> None:
        """Send a chunk of stdout or stderr as it came (redacted), when the run asks."""
        if self._stream is not None and data:
            text = self._decoders[event_type].decode(data)
            if text:
                self._send(functools.partial(self._stream, event_type, text))

    def outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        """The parser's outcome of the exited child, once what was held back for
        redaction went to the parser too; its texts redacted as the stream was."""
        if not self._redacting:
            return self.parser.outcome(exit_status)
        self._take_stderr(self._stderr.finish())
        if self._counted is None:
            self._take_stdout(self._stdout.finish())
        if self._report_event is not None:
            rest = self._message_text("", end=True)
            if rest:
                self._send(functools.partial(self._report_event, MessageText(rest)))
        outcome = self._redaction.outcome(self.parser.outcome(exit_status))
        if self._counted is None:
            return outcome
        assert isinstance(self.parser, CommandParser)  # the one parser whose stdout is counted
        size = self.parser.stdout_size.then(self._counted)
        return attrs.evolve(outcome, final_bytes=size.total_bytes, final_lines=size.lines)

    def _redacted(self, events: list[AgentEvent]) -> list[AgentEvent]:
        """Normalized events with their text redacted: message pieces as one stream
        (held back where a secret may go on), a tool's summary and a plan's entries
        whole."""
        redacted: list[AgentEvent] = []
        for event in events:
            if isinstance(event, MessageText):
                text = self._message_text(event.text, end=event.final)
                if text or event.final:
                    redacted.append(MessageText(text, final=event.final))
                continue
            if isinstance(event, ToolStarted | ToolEnded | PlanUpdated):
                rest = self._message_text("", end=True)  # the text before a tool is whole
                if rest:
                    redacted.append(MessageText(rest))
            if isinstance(event, ToolStarted) and event.summary is not None:
                event = attrs.evolve(event, summary=self._redaction.text(event.summary))
            if isinstance(event, PlanUpdated):
                entries = event.entries
                event = PlanUpdated(
                    tuple(attrs.evolve(e, content=self._redaction.text(e.content)) for e in entries)
                )
            redacted.append(event)
        return redacted

    def _message_text(self, text: str, *, end: bool) -> str:
        data = self._messages.feed(text.encode("utf-8", "surrogatepass"))
        if end:
            data += self._messages.finish()
        return self._message_decoder.decode(data, final=end)

    def watch_turns(self, max_turns: int, on_exceeded: Callable[[], None]) -> None:
        """Call `on_exceeded` once the parser has seen response `max_turns` + 1 begin."""
        self._turn_limit = (max_turns, on_exceeded)
        self._check_turns()  # output read before the watch began counts too

    def watch_budget(self, budget: Budget, on_reached: Callable[[ReachedLimit], None]) -> None:
        """Call `on_reached` with the limit's name once the usage the parser has summed
        reaches one of `budget`'s limits (checked after each chunk, as turns are), unless
        the CLI has printed its final event by then."""
        self._budget = (budget, on_reached)
        self._check_budget()  # output read before the watch began counts too

    def unwatch_limits(self) -> None:
        """Stop watching the turns and the budget (the child's end is decided)."""
        self._turn_limit = None
        self._budget = None

    def _check_budget(self) -> None:
        # A CLI that printed its final event has nothing left to spend: its answer
        # stands (as a lingering one's does), whatever its last response cost.
        if self._budget is None or self.parser.finished:
            return
        budget, on_reached = self._budget
        if (limit := budget.reached(self.parser.usage)) is not None:
            self._budget = None
            on_reached(limit)

    def _check_turns(self) -> None:
        if self._turn_limit is not None and self.parser.turns > self._turn_limit[0]:
            on_exceeded = self._turn_limit[1]
            self._turn_limit = None
            on_exceeded()

    def watch_stall(self, stall_s: float, on_stall: Callable[[], None]) -> StallWatch:
        """Call `on_stall` once no output arrived for `stall_s` seconds (an agent CLI's
        retry notices are not output: see `retrying`)."""
        return StallWatch(self, stall_s, on_stall)


def _nothing() -> None:
    pass


def _only_counts(parser: OutputParser) -> bool:
    """Whether the parser keeps none of the stdout that follows (a command's, once full)."""
    return isinstance(parser, CommandParser) and not parser.keeps_stdout


def agent_event(index: int, event: AgentEvent) -> Event:
    """A normalized event of child `index` as the `run/event` it is: `message`, `tool`,
    `usage` or `plan` (a message's `final` carried only when true, as the wire always had
    it)."""
    match event:
        case MessageText(text=text, final=final):
            return MessageEvent(index=index, text=text, final=True if final else None)
        case UsageSoFar(usage=usage):
            return UsageEvent(index=index, usage=usage)
        case ToolStarted(tool_id=tool_id, name=name, kind=kind, summary=summary):
            return ToolEvent(
                index=index, phase=Phase.START, tool_id=tool_id, name=name, kind=kind,
                summary=summary,
            )  # fmt: skip
        case ToolEnded(tool_id=tool_id, name=name, kind=kind, is_error=is_error):
            return ToolEvent(
                index=index, phase=Phase.END, tool_id=tool_id, name=name, kind=kind,
                is_error=is_error,
            )  # fmt: skip
        case PlanUpdated(entries=entries):
            return PlanEvent(index=index, entries=entries)


class StreamGate:
    """Holds back every streamed child while their events cannot keep up: the
    client's outgoing queue is full, or the writes waiting for the disk are.

    app.py closes it for a reason and opens it again for the same reason; it is
    open when no reason is left. A streamed child's sink is a member while it runs.
    """

    def __init__(self) -> None:
        self._reasons: set[str] = set()
        self._members: set[ChildSink] = set()

    @property
    def closed(self) -> bool:
        return bool(self._reasons)

    def close(self, reason: str) -> None:
        self._reasons.add(reason)
        for sink in self._members:
            sink.hold()

    def open(self, reason: str) -> None:
        self._reasons.discard(reason)
        if not self._reasons:
            for sink in self._members:
                sink.release()

    def join(self, sink: ChildSink) -> None:
        self._members.add(sink)
        if self.closed:
            sink.hold()

    def leave(self, sink: ChildSink) -> None:
        self._members.discard(sink)


class StallWatch:
    """A timer re-armed for the remaining quiet time: it wakes once per stall
    period, not once per chunk of output."""

    def __init__(self, sink: ChildSink, stall_s: float, on_stall: Callable[[], None]) -> None:
        self._sink = sink
        self._stall_s = stall_s
        self._on_stall = on_stall
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(stall_s, self._check_stall)

    def _check_stall(self) -> None:
        if self._sink.held:
            # Held back because the client is not reading: the child may be working
            # as hard as ever. The run's timeout still bounds it.
            self._sink.last_active = self._loop.time()
        if getattr(self._sink.parser, "tool_running", False):
            # An agent's tool is running (agent CLIs print nothing meanwhile): that is
            # work, not a stall. The run's timeout still bounds it.
            self._sink.last_active = self._loop.time()
        remaining = self._sink.last_active + self._stall_s - self._loop.time()
        if remaining <= 0:
            self._on_stall()
        else:
            self._timer = self._loop.call_later(remaining, self._check_stall)

    def cancel(self) -> None:
        self._timer.cancel()
