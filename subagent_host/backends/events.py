"""What an agent child does, in one language for every CLI: text, tools, usage.

Each agent CLI prints its own JSON events (pi's `message_update`, Claude Code's
`assistant` blocks, codex's `item.*`); its parser turns them into the
normalized events below, which the child sink drains after every chunk of
output (`OutputParser.events`) and the run sends as `run/event`s of types
`message`, `tool`, `usage` and `plan` (protocol.md §11):

- `MessageText`: the assistant's text as the CLI streams it, deltas where it
  emits them, whole blocks otherwise; `final` on the last text of a model
  response (a response whose text was all sent already ends with an empty one).
- `ToolStarted` / `ToolEnded`: a tool call beginning and its result back, with
  the CLI's own name, ACP's kind (so a UI can treat the three CLIs alike), a
  short one-line summary of its input (the command, the path, the pattern),
  never file contents, and whether the tool reported a failure.
- `UsageSoFar`: the child's cumulative usage, whenever it changed.
- `PlanUpdated`: the agent's plan, whole, each time it changed it (`plan` events:
  ACP agents say theirs; another CLI's plan tool could be told the same way).

`NormalizedEvents` is what the parsers share to produce them: text pieces of
one chunk joined into one event, the end of a response marked once, usage
sent at the end of a chunk, only when it differs from what was sent last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

import attrs

from subagent_host.backends.reports import short

# The kinds and phases of a tool call are the wire's too (`values/events.py`): re-exported for
# the parsers.
from subagent_host.values.events import Phase as Phase
from subagent_host.values.events import PlanEntry as PlanEntry
from subagent_host.values.events import ToolKind as ToolKind
from subagent_host.values.facts import Usage

ToolCatalog = Mapping[str, tuple[ToolKind, tuple[str, ...]]]
"""A CLI's tools by name: each one's kind, and the input fields that summarise a call
of it (the first one present is shown). A tool not listed is `other`, unsummarised."""

SUMMARY_CHARS: Final = 200
"""A tool summary's bound: one line a UI can show beside the tool's name."""
TOOL_ID_CHARS: Final = 200
"""A tool call's id as the CLI gave it, bounded (ids are short; a broken one is cut)."""
PLAN_ENTRY_CHARS: Final = 1000
"""A plan entry's bound: a step in a few words, not a document (a longer one is cut)."""
MESSAGE_PIECE_CHARS: Final = 32 * 1024
"""The most text one `message` event carries: a CLI printing a whole block of
megabytes sends it in pieces, so that each event weighs about what an `output`
event does and the run's retained events stay bounded (protocol.md §9)."""


@attrs.frozen
class MessageText:
    """Assistant text: a delta or a whole block; `final` ends a model response's text."""

    text: str
    final: bool = False


@attrs.frozen
class ToolStarted:
    """A tool call began (`tool` event, `phase` `start`)."""

    tool_id: str
    name: str
    kind: ToolKind
    summary: str | None = None


@attrs.frozen
class ToolEnded:
    """A tool call's result is back (`tool` event, `phase` `end`)."""

    tool_id: str
    name: str
    kind: ToolKind
    is_error: bool


@attrs.frozen
class UsageSoFar:
    """The child's tokens (and cost) reported so far, summed over its life."""

    usage: Usage


@attrs.frozen
class PlanUpdated:
    """The agent's plan, every entry: it replaces the one told before."""

    entries: tuple[PlanEntry, ...]


AgentEvent = MessageText | ToolStarted | ToolEnded | UsageSoFar | PlanUpdated


def summary_of(value: object) -> str | None:
    """`value` as a tool summary: one line, printable, at most SUMMARY_CHARS characters
    (cut with an ellipsis); None when there is nothing to show."""
    if not isinstance(value, str):
        return None
    line = " ".join("".join(c if c.isprintable() else " " for c in value).split())
    if not line:
        return None
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…"


def input_summary(arguments: object, keys: tuple[str, ...]) -> str | None:
    """The summary of a tool's input: the first of `keys` it holds as text (a command
    given as an argv list is joined)."""
    if not isinstance(arguments, Mapping):
        return None
    for key in keys:
        value = arguments.get(key)
        if isinstance(value, list) and all(isinstance(part, str) for part in value):
            value = " ".join(value)
        if (summary := summary_of(value)) is not None:
            return summary
    return None


class NormalizedEvents:
    """The normalized events a parser has produced since they were last drained.

    `whole_blocks`: the CLI prints its text in whole blocks, and says that a response
    ended only with its next event (Claude Code): a block is held until then, so that
    it goes out once, marked `final` when it is the last, rather than followed by an
    empty final message. Text streamed in deltas goes out at the end of each chunk.
    """

    def __init__(self, *, whole_blocks: bool = False) -> None:
        self._whole_blocks = whole_blocks
        self._pending: list[AgentEvent] = []
        self._text: list[str] = []  # text of the response not yet made an event
        self._response_has_text = False  # text of the response was made an event
        self._usage_sent: Usage | None = None
        self._tools: dict[str, ToolStarted] = {}  # started and not ended, by id

    def text(self, piece: str) -> None:
        """Assistant text of the current response (a delta, or a whole block)."""
        if piece:
            self._text.append(piece)

    def end_response(self) -> None:
        """The current model response ended: its last text is `final`."""
        if self._text:
            self._flush_text(final=True)
        elif self._response_has_text:
            self._pending.append(MessageText("", final=True))
        self._response_has_text = False

    def tool_started(
        self, tool_id: object, name: object, arguments: object, catalog: ToolCatalog
    ) -> None:
        """A call of a tool of `catalog` began, with these arguments."""
        shown = short(name)
        kind, keys = catalog.get(shown, (ToolKind.OTHER, ()))
        self.tool_began(tool_id, shown, kind, input_summary(arguments, keys))

    def tool_began(self, tool_id: object, name: str, kind: ToolKind, summary: str | None) -> None:
        """A call began, its kind and summary known."""
        call = ToolStarted(short(tool_id, TOOL_ID_CHARS), name, kind, summary)
        self._tools[call.tool_id] = call
        self._flush_text(final=False)  # text said before the tool comes first
        self._pending.append(call)

    def tool_ended(self, tool_id: object, *, is_error: bool) -> None:
        """A call's result is back (one that was never said to begin is not told)."""
        started = self._tools.pop(short(tool_id, TOOL_ID_CHARS), None)
        if started is not None:
            call = ToolEnded(started.tool_id, started.name, started.kind, is_error)
            self._pending.append(call)

    def plan(self, entries: Iterable[PlanEntry]) -> None:
        """The agent's plan now, whole (it replaces the one before); each entry's content
        at most PLAN_ENTRY_CHARS."""
        self._flush_text(final=False)  # text said before the plan comes first
        bounded = (attrs.evolve(e, content=e.content[:PLAN_ENTRY_CHARS]) for e in entries)
        self._pending.append(PlanUpdated(tuple(bounded)))

    def is_tool_running(self, tool_id: object) -> bool:
        """Whether a call with this id began and has not ended."""
        return short(tool_id, TOOL_ID_CHARS) in self._tools

    def drain(self, usage: Usage | None) -> list[AgentEvent]:
        """Everything since the last call, the text of one chunk as one event; then
        `usage` (the usage so far) when it changed since it was last sent."""
        if not self._whole_blocks:
            self._flush_text(final=False)
        if usage is not None and usage != self._usage_sent:
            self._usage_sent = usage
            self._pending.append(UsageSoFar(usage))
        pending, self._pending = self._pending, []
        return pending

    def _flush_text(self, *, final: bool) -> None:
        if not self._text:
            return
        text, self._text = "".join(self._text), []
        pieces = [
            text[i : i + MESSAGE_PIECE_CHARS] for i in range(0, len(text), MESSAGE_PIECE_CHARS)
        ]
        for number, piece in enumerate(pieces, 1):
            self._pending.append(MessageText(piece, final=final and number == len(pieces)))
        self._response_has_text = not final
