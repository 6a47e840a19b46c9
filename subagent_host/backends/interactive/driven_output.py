"""The output parser of a child driven through its machine protocol: each line of its
stdout to its conversation, and what the conversation says to whoever carries it out.

A driven child (interactive, or one whose permissions someone but its CLI answers)
is supervised like any other: its sink feeds a parser, watches for a stall, counts its
turns and its usage, and its outcome settles it. `DrivenOutput` is that parser. It cuts
stdout into lines (each bounded (backends/jsonlines.py `Lines`)), hands each to the
`Conversation`, and passes every reaction on, in order, to `react` (the child's live
controller, runs/live_child.py): bytes for stdin, turns, permissions, messages, and the
normalized agent events, which it also reads for what an outcome needs (the last turn's
text, the usage so far, the tools running).

Its outcome: a child the host closed (`run/close`, its idle timeout, the end of a
one-shot driven child's only turn) `completed`, as a CLI's own normal end would be,
whatever its exit status (claude exits 1 when its input closes after an interrupted
turn); a child that broke its protocol `failed` (`protocol-error`); a child that exited
on its own, as its exit says. A plain command's output stays its own: its parser
(`inner`) keeps its stdout as the final text and judges its exit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

import attrs

from subagent_host.backends.base import OutputParser, ParsedOutcome
from subagent_host.backends.events import (
    AgentEvent,
    MessageText,
    ToolEnded,
    ToolStarted,
    UsageSoFar,
)
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.interactive.base import (
    Conversation,
    ProtocolFailure,
    Reaction,
    TurnEnded,
    TurnStarted,
)
from subagent_host.backends.jsonlines import Lines
from subagent_host.backends.output import RollingTail
from subagent_host.backends.reports import (
    STDERR_TAIL_BYTES,
    error_data,
    exit_message,
    stderr_reason,
    with_reason,
)
from subagent_host.values.facts import Usage

PROTOCOL_ERROR: Final = "protocol-error"
"""The error code of a driven child whose CLI broke its protocol."""
TURN_TEXT_CHARS: Final = 16 * 1024 * 1024
"""The head of a turn's text that is kept (the largest output cap a server may have,
settings/model.py MAX_CAP_BYTES): an agent that streams without end costs no more."""


class TurnText:
    """A turn's text: its head kept (TURN_TEXT_CHARS), its whole size counted."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._kept = 0
        self.bytes = 0
        self.lines = 0
        self._ends_open = False

    def add(self, text: str) -> None:
        if not text:
            return
        self.bytes += len(text.encode("utf-8"))
        self.lines += text.count("\n")
        self._ends_open = not text.endswith("\n")
        if self._kept < TURN_TEXT_CHARS:
            piece = text[: TURN_TEXT_CHARS - self._kept]
            self._parts.append(piece)
            self._kept += len(piece)

    def outcome(self, usage: Usage | None, session_id: str | None) -> ParsedOutcome:
        """A completed child's outcome with this text as its answer, measured whole."""
        return ParsedOutcome(
            completed=True,
            final_text="".join(self._parts),
            final_bytes=self.bytes,
            final_lines=self.lines + (1 if self._ends_open else 0),
            usage=usage,
            backend_session_id=session_id,
        )


class DrivenOutput:
    """A driven child's `OutputParser`: lines to its conversation, reactions to `react`."""

    def __init__(
        self, backend: str, conversation: Conversation, inner: OutputParser | None = None
    ) -> None:
        self.backend = backend
        self.conversation: Final = conversation
        self._inner = inner
        self._lines = Lines()
        self._stderr = RollingTail()
        self._held: list[Reaction] | None = []
        self._react: Callable[[Reaction], None] | None = None
        self._turns = 0
        self._usage: Usage | None = None
        self._tools: set[str] = set()
        self._turn_text = TurnText()
        self._answer = TurnText()
        """The text of the last turn that ended: its last message (what followed its
        last tool)."""
        self._ended_turns = 0
        self.closed = False
        """The host ended the conversation (close, idle, a one-shot driven child's end)."""
        self.failure: str | None = None
        """Why the CLI broke its protocol, once it did."""

    def attach(self, react: Callable[[Reaction], None]) -> None:
        """Who carries out the reactions from now on (the ones so far first, in order)."""
        self._react = react
        held, self._held = self._held or [], None
        for reaction in held:
            react(reaction)

    def take(self, reactions: Iterable[Reaction]) -> None:
        """Reactions of a request to the conversation (`opening`, `send`...): read, then
        carried out like those of a line."""
        for reaction in reactions:
            self._take(reaction)

    # --- OutputParser ------------------------------------------------------------------

    def on_stdout(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.on_stdout(data)
        for line in self._lines.feed(data):
            self.take(self.conversation.on_line(line))

    def on_stderr(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.on_stderr(data)
        self._stderr.feed(data)

    def activity(self) -> list[str]:
        # An agent's tools are its `tool` events; a command's are none.
        return self._inner.activity() if self._inner is not None else []

    def events(self) -> list[AgentEvent]:
        return []  # passed on to `react` in order with the turns they belong to

    @property
    def finished(self) -> bool:
        return False  # a driven child ends when the host closes it, or on its own

    @property
    def turns(self) -> int:
        """Turns begun: an interactive child's `maxTurns` counts its turns."""
        return self._turns

    @property
    def session_id(self) -> str | None:
        return self.conversation.session_id

    @property
    def usage(self) -> Usage | None:
        return self._usage

    @property
    def tool_running(self) -> bool:
        """A tool runs, or the child waits for input: its silence then is no stall."""
        return bool(self._tools) or not self.conversation.turn_running

    def outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        if self._inner is not None:  # a command: its stdout, judged by its exit
            outcome = self._inner.outcome(exit_status)
            if self.closed and not outcome.completed:
                outcome = attrs.evolve(
                    outcome, completed=True, error_code=None, error_message=None, error_data=None
                )
            return outcome
        # The last turn's answer; a child closed in its first turn has said what it said.
        text = self._answer if self._ended_turns else self._turn_text
        answer = text.outcome(self._usage, self.session_id)
        stderr = self._stderr.text(STDERR_TAIL_BYTES)
        if self.failure is not None:
            data = error_data(exit_status, stderr, self._lines.dropped_lines)
            return answer.failed(PROTOCOL_ERROR, self.failure, data)
        if self.closed or exit_status.exit_code == 0:
            return answer
        message = with_reason(
            exit_message(self.backend, exit_status), stderr_reason(self.backend, stderr)
        )
        dropped = self._lines.dropped_lines
        return answer.failed("exit-status", message, error_data(exit_status, stderr, dropped))

    # --- what the conversation said ------------------------------------------------------

    def _take(self, reaction: Reaction) -> None:
        match reaction:
            case TurnStarted():
                self._turns += 1
                self._turn_text = TurnText()
            case TurnEnded():
                self._answer = self._turn_text
                self._ended_turns += 1
            case ProtocolFailure(reason=reason):
                self.failure = reason
            case MessageText(text=text):
                self._turn_text.add(text)
            case ToolStarted(tool_id=tool_id):
                self._tools.add(tool_id)
                self._turn_text = TurnText()  # the answer is what follows the last tool
            case ToolEnded(tool_id=tool_id):
                self._tools.discard(tool_id)
            case UsageSoFar(usage=usage):
                self._usage = usage
            case _:
                pass
        if self._react is None:
            assert self._held is not None
            self._held.append(reaction)
        else:
            self._react(reaction)
