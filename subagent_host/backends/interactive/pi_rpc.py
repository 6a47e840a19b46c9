"""A conversation with pi in its RPC mode (`pi --mode rpc`), checked with pi 0.73.1.

    pi --mode rpc --session-dir DIR [--session ID] [--provider P --model M] ...

The launch is the one-shot launch of backends/pi.py in another mode (`PiBackend.argv`),
with nothing written on stdin at start: stdin stays open for the protocol.

The protocol (the package's `docs/rpc.md`): one JSON object a line each way. A command
carries an `id`, which pi echoes in its `{"type": "response", "command", "success",
"error"?, "data"?}`; everything else pi prints is an event of its session, the same
shapes `--mode json` prints (`agent_start`, `turn_start`, `message_update`,
`tool_execution_*`, `message_end`, `agent_end`, `auto_retry_*`, `queue_update`...), which
`PiParser` turns into the normalized agent events, one parser for both modes.

What this driver writes, and why (seen on the wire against the mock LLM; the races,
which cannot be shown on demand, read in pi's source: `core/agent-session.js`, and
`agent-loop.js` of `@mariozechner/pi-agent-core`):

- `get_state` first: rpc mode prints no `session` event, and a resume needs pi's
  session id (`session_id`, from the response's `data.sessionId`).
- A message that starts a turn: `{"type": "prompt", "message", "streamingBehavior":
  "followUp"}`. pi refuses a bare prompt while its run is still going, and its run ends
  a moment after it prints `agent_end`; with `followUp` a prompt that arrives in that
  moment joins the run's end instead of being refused, and starts a run otherwise.
- `steer` while a turn runs: the same prompt with `"streamingBehavior": "steer"`: pi
  hands it to the model before its next request in the same run (after the running
  tools end). It is `delivered` once written. Before pi began the turn's run
  (`agent_start`) it is kept, and written at `agent_start`: pi takes a second prompt
  before its run began as a run of its own, which fails silently.
- `queue` while a turn runs: kept here, not in pi, and written as the next turn's
  prompt when the turn ends (`MessageDelivered` then: written to pi, which starts a run
  for it at once, so the model reads it in its next request). pi's own follow-up queue
  (`follow_up`) is not used, for what pi 0.73.1 does with it: an `abort` leaves it
  full, and it is then delivered after the *next* message's answer, out of order; a
  `follow_up` that reaches pi once its run ended waits, unseen, for some later run; and
  messages pi delivers from it share one `agent_end` with the turn before, so the end
  of a message's turn would not be seen. One queued message is one turn.
- Interrupt: `{"type": "abort"}`: pi kills the running tool (its result says "Command
  aborted"), ends the run with an assistant message of `stopReason: "aborted"` and
  `agent_end`, and answers the abort after that. The turn ends `interrupted`. An
  interrupt before pi began the run waits for `agent_start` (an abort with no run
  going is a no-op for pi). A queued message is delivered after an interrupted turn
  like after any other.
- A dialog an extension asks for (`extension_ui_request` `select`, `confirm`,
  `input`, `editor`, or one not known) is answered `cancelled` at once, so pi never
  waits for us; the fire-and-forget ones (`notify`, `setStatus`...) are ignored.

Turns: a turn starts when a prompt is written (or when pi starts a run on its own:
`agent_start` or `auto_retry_start` with no turn running — pi retrying a request
after the run that failed it ended) and ends at `agent_end`, its stop reason the last
assistant message's: `stop` is `end_turn`, `aborted` is `interrupted`, others (`error`,
`length`) are pi's own. pi prints `auto_retry_start` after the failed run's
`agent_end`, so a retried request is two turns: one ended `error`, one started by pi.
A steer that reaches pi once its run ended (its `agent_end` not read here yet) starts a
run of its own, which is counted the same way: a turn pi started.

A `response` with `success: false` to a prompt of ours (a refused message, say "No
API key found") is a `MessageRefused` naming the message and pi's error: pi lives on
and takes the next one. When the refused prompt opened a turn (no run began for it),
that turn ends `error` and a queued message goes next. A refusal of another command,
or of a line pi could not read (a response with no id), is a `ProtocolFailure`, as is
a line that is not a JSON object. pi has no permission prompts: it launches only with
approvals `cli` (any other is refused, `approvals-unsupported`), and `answer` always
raises KeyError.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from typing import Any, Final

import attrs

from subagent_host.backends.base import ItemSpec, Launch
from subagent_host.backends.interactive.base import (
    OPENING,
    Approvals,
    Delivery,
    DeliveryState,
    MessageDelivered,
    MessageRefused,
    ProtocolFailure,
    Reaction,
    TurnEnded,
    TurnStarted,
    Write,
    approvals_supported,
)
from subagent_host.backends.jsonlines import json_object
from subagent_host.backends.pi import PiBackend, PiParser
from subagent_host.backends.reports import short

# pi's `stopReason` of a run's last assistant message, as a turn's stop reason; any
# other (`error`, `length`) is pi's own word.
STOP_REASONS: Final = {"stop": "end_turn", "toolUse": "end_turn", "aborted": "interrupted"}
# Extension UI requests that expect no answer (docs/rpc.md, "Extension UI Protocol").
FIRE_AND_FORGET: Final = frozenset(
    {"notify", "setStatus", "setWidget", "setTitle", "set_editor_text"}
)
STATE_REQUEST: Final = "the state request"
ID_PREFIX: Final = "subagent-host-"
REASON_CHARS: Final = 300
"""How much of pi's error, or of a line it broke, a failure quotes."""


APPROVALS: Final = frozenset({Approvals.CLI})
"""pi never asks before a tool runs: its own rules decide."""


def interactive_launch(backend: PiBackend, item: ItemSpec, approvals: Approvals) -> Launch:
    """The interactive launch of pi for `item`: its one-shot launch in rpc mode, stdin
    left open for the conversation (the first prompt is `opening`'s, not stdin's).
    ValueError (`approvals-unsupported`): approvals other than `cli`."""
    approvals_supported(backend.id, approvals, APPROVALS)
    return attrs.evolve(backend.launch(backend.argv(item, "rpc"), item), stdin=None)


class PiRpcConversation:
    """One pi process in rpc mode (a `Conversation`, backends/interactive/base.py)."""

    def __init__(self) -> None:
        self._parser = PiParser()
        self._turn_running = False
        self._run_started = False  # pi began the current turn's run (`agent_start`)
        self._abort_wanted = False  # an interrupt came before the run began
        self._abort_sent = False
        self._steers: list[tuple[str, str]] = []  # (message id, text) until the run begins
        self._queued: deque[tuple[str, str]] = deque()  # until the turn ends
        self._commands: dict[str, str] = {}  # ids of commands unanswered: what each was
        # Prompts unanswered, by command id: the message's id, and whether it began a turn.
        self._prompts: dict[str, tuple[str, bool]] = {}
        self._last_id = 0
        self._failed = False
        self._session_id: str | None = None

    @classmethod
    def for_item(cls, item: ItemSpec, approvals: Approvals) -> PiRpcConversation:
        """The conversation of `interactive_launch(backend, item, approvals)` (pi's is
        the same for every item; ValueError: approvals other than `cli`)."""
        approvals_supported("pi", approvals, APPROVALS)
        return cls()

    @property
    def turn_running(self) -> bool:
        return self._turn_running

    @property
    def session_id(self) -> str | None:
        """pi's session id, once it answered the state request (what a resume continues)."""
        return self._session_id

    def opening(self, prompt: str) -> Sequence[Reaction]:
        state = self._command({"type": "get_state"}, STATE_REQUEST)
        return [state, *self._start_turn(prompt, OPENING)]

    def on_line(self, line: bytes) -> Sequence[Reaction]:
        if self._failed or not line.strip():
            return []
        event = json_object(line)
        if event is None:
            quoted = short(line.decode("utf-8", "replace"), REASON_CHARS)
            return self._fail(f"pi printed a line that is not a JSON object: {quoted}")
        kind = event.get("type")
        if kind == "response":
            return self._on_response(event)
        if kind == "extension_ui_request":
            return self._on_ui_request(event)
        reactions: list[Reaction] = []
        if kind in ("agent_start", "auto_retry_start") and not self._turn_running:
            # pi works again on its own: a retry of the request whose turn ended in error.
            self._turn_running, self._run_started = True, False
            reactions.append(TurnStarted())
        if kind == "agent_start":
            reactions += self._run_began()
        self._parser.on_event(event)
        reactions += self._parser.events()
        # The one-shot run's activity lines say what the tool events say already: not
        # kept, so that a long conversation does not pile them up.
        self._parser.activity()
        if kind == "agent_end" and self._turn_running:
            reactions += self._turn_ended(_stop_reason(event.get("messages")))
        return reactions

    def send(
        self, message_id: str, text: str, delivery: Delivery
    ) -> tuple[Sequence[Reaction], DeliveryState]:
        if not self._turn_running:
            return self._start_turn(text, message_id), DeliveryState.DELIVERED
        if delivery is Delivery.STEER and self._run_started:
            prompt = self._prompt(text, "steer", message_id)
            return [prompt], DeliveryState.DELIVERED
        waiting = self._steers if delivery is Delivery.STEER else self._queued
        waiting.append((message_id, text))
        return [], DeliveryState.QUEUED

    def interrupt(self) -> Sequence[Reaction]:
        if not self._turn_running or self._abort_sent or self._abort_wanted:
            return []
        if not self._run_started:
            self._abort_wanted = True  # an abort now would find no run to end
            return []
        return [self._abort()]

    def answer(self, permission_id: str, option_id: str) -> Sequence[Reaction]:
        raise KeyError(permission_id)  # pi never asks: no permission is ever pending

    def queued(self) -> Sequence[str]:
        return [message_id for message_id, _ in (*self._steers, *self._queued)]

    def _start_turn(self, text: str, message_id: str) -> list[Reaction]:
        self._turn_running, self._run_started = True, False
        self._abort_wanted = self._abort_sent = False
        return [self._prompt(text, "followUp", message_id, starts_turn=True), TurnStarted()]

    def _run_began(self) -> list[Reaction]:
        self._run_started = True
        reactions: list[Reaction] = []
        for message_id, text in self._steers:
            reactions.append(self._prompt(text, "steer", message_id))
            reactions.append(MessageDelivered(message_id))
        self._steers.clear()
        if self._abort_wanted:
            self._abort_wanted = False
            reactions.append(self._abort())
        return reactions

    def _turn_ended(self, stop_reason: str) -> list[Reaction]:
        reactions: list[Reaction] = [TurnEnded(stop_reason)]
        self._turn_running = self._run_started = False
        self._abort_wanted = self._abort_sent = False
        # Steers wait only for a run to begin, and each run begins before it ends: none
        # is left here, but were one left, it goes first.
        self._queued.extendleft(reversed(self._steers))
        self._steers.clear()
        if self._queued:
            message_id, text = self._queued.popleft()
            prompt, started = self._start_turn(text, message_id)
            reactions += [prompt, MessageDelivered(message_id), started]
        return reactions

    def _on_response(self, event: dict[str, Any]) -> list[Reaction]:
        command_id = event.get("id")
        what = self._commands.pop(command_id, None) if isinstance(command_id, str) else None
        prompt = self._prompts.pop(command_id, None) if isinstance(command_id, str) else None
        succeeded = event.get("success") is True
        error = short(event.get("error"), REASON_CHARS)
        if what is None:
            if command_id is None and not succeeded:  # a line of ours pi could not read
                return self._fail(f"pi refused a command ({short(event.get('command'))}): {error}")
            return []  # not a command of ours
        if not succeeded and prompt is not None:
            return self._refused(*prompt, error)
        if not succeeded:
            return self._fail(f"pi refused {what}: {error}")
        data = event.get("data")
        if what == STATE_REQUEST and isinstance(data, dict):
            session = data.get("sessionId")
            self._session_id = session if isinstance(session, str) else None
        return []

    def _refused(self, message_id: str, began_turn: bool, error: str) -> list[Reaction]:
        """pi refused one message (say "No API key found") and waits for the next."""
        reactions: list[Reaction] = [MessageRefused(message_id, error)]
        if began_turn and self._turn_running and not self._run_started:
            # No run began for it: the turn it opened ends here, and the queue goes on.
            reactions += self._turn_ended("error")
        return reactions

    def _on_ui_request(self, event: dict[str, Any]) -> list[Reaction]:
        request_id = event.get("id")
        if event.get("method") in FIRE_AND_FORGET or not isinstance(request_id, str):
            return []
        # A dialog no one here can answer: dismissed, so the extension goes on at once.
        return [_line({"type": "extension_ui_response", "id": request_id, "cancelled": True})]

    def _prompt(
        self, text: str, behaviour: str, message_id: str, *, starts_turn: bool = False
    ) -> Write:
        body = {"type": "prompt", "message": text, "streamingBehavior": behaviour}
        write = self._command(body, f"message {message_id}")
        self._prompts[f"{ID_PREFIX}{self._last_id}"] = (message_id, starts_turn)
        return write

    def _abort(self) -> Write:
        self._abort_sent = True
        return self._command({"type": "abort"}, "the interrupt")

    def _command(self, body: dict[str, Any], what: str) -> Write:
        self._last_id += 1
        command_id = f"{ID_PREFIX}{self._last_id}"
        self._commands[command_id] = what
        return _line({"id": command_id, **body})

    def _fail(self, reason: str) -> list[Reaction]:
        self._failed = True
        return [ProtocolFailure(reason)]


def _line(message: dict[str, Any]) -> Write:
    # ASCII only: a lone surrogate goes as its escape, and pi splits lines on "\n" alone.
    return Write((json.dumps(message, separators=(",", ":")) + "\n").encode("ascii"))


def _stop_reason(messages: object) -> str:
    """The turn's stop reason: that of the run's last assistant message."""
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "assistant":
                reason = message.get("stopReason")
                if isinstance(reason, str) and reason:
                    return STOP_REASONS.get(reason) or short(reason)
                break
    return "end_turn"
