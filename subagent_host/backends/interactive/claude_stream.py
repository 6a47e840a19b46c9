"""Claude Code as an interactive child: `stream-json` in and out, with control requests.

Checked with Claude Code 2.1.197 against the loopback mock LLM. The child runs as

    claude -p --input-format stream-json --output-format stream-json --verbose
           --replay-user-messages  ...what a one-shot child gets (claude.py)...

and stays alive until its stdin closes. It then exits 0, or 1 when its last turn
did not succeed (interrupted, at its turn limit, failed): the exit says how the last
turn ended, not that the child failed. One JSON object a line each way:

- A message is `{"type":"user","message":{"role":"user","content":TEXT},"uuid":U}`.
  Each carries a fresh `uuid` of ours: with `--replay-user-messages` Claude Code
  prints the message back (`"isReplay":true`, the same `uuid`) when its model takes
  it, which is how the conversation knows whether a message joined a turn.
- A turn prints `system`/`init`, the replay, `assistant` and `user` (tool results)
  events, and ends with one `result` (its `subtype`: `success`, or `error_*`;
  `is_error` true on a failed `success`): `TurnEnded` with `end_turn`, `error`,
  `max_turns`, `max_budget`, or `interrupted` (below). The agent events (text, tools,
  usage) come from the one-shot child's parser (`ClaudeParser`), fed event by event.
- A message written while a turn runs (`steer`) joins it: the model sees it at its
  next request, after the running tool's result, and one `result` ends both. When
  the turn ends before the model took it (the turn was interrupted, or its last
  answer was already on the way), Claude Code starts a turn of its own for it at
  once: a `result` while a written message has not come back is `TurnEnded` then
  `TurnStarted`. A `queue` message stays here until the turn's `result`, and is
  then written as the next turn (one message a turn; `MessageDelivered`).
- Interrupt: `{"type":"control_request","request_id":ID,"request":{"subtype":
  "interrupt"}}`; Claude Code answers a `success` `control_response`, kills the
  running tool's command, and ends the turn with a `result` of subtype
  `error_during_execution`: `interrupted`. The next message works as usual.
- Approvals (`approvals` `client` or `policy`): the child runs with
  `--permission-mode default --permission-prompt-tool stdio` and without
  `--allowedTools`, so every tool use Claude Code does not deem safe (a read, or a
  command like `echo` or `sleep`) is asked for: a `control_request` of subtype
  `can_use_tool` (`tool_name`, `input`, `tool_use_id`, `description`,
  `permission_suggestions`) is a `PermissionAsked` (its id the request's), with
  four options. The answer is a `control_response` of subtype `success` whose
  `response` is `{"behavior":"allow","updatedInput":INPUT}` (the input is
  required) or `{"behavior":"deny","message":...}` (the model gets an error tool
  result with the message, and goes on). `allow-always` also sends the rules
  Claude Code suggested (`addRules` with `behavior` `allow`) as
  `updatedPermissions`, for the session only (never into the user's settings
  files), so a like use is not asked again; when it suggested none, it is
  `allow-once`. `reject-always` is `reject-once`: Claude Code's deny answer takes
  no rules. A request Claude Code withdraws (`control_cancel_request`, e.g. on an
  interrupt) or one still open when its turn ends is no longer pending: a
  `PermissionWithdrawn` says so (before the turn's `TurnEnded`).
  With `approvals` `cli` the child runs as a one-shot child does (`dontAsk`, its
  tools pre-approved) and never asks. The conversation is the same for every
  `approvals` (`for_item`): what Claude Code asks depends on its launch alone.
- Claude Code refuses no single message in this mode (a message it cannot take
  fails the turn, `result` with an error), so this driver never says
  `MessageRefused`. Its session id (`session_id`) is the `system`/`init` event's.
- Any other `control_request` Claude Code sends gets an error `control_response`
  at once, so it never waits on us. The `control_response`s it prints are ours
  echoed back (and the answer to an interrupt); they need nothing.
"""

from __future__ import annotations

import collections
import itertools
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from subagent_host.backends.base import ItemSpec, Launch
from subagent_host.backends.claude import MAX_TURNS_SUBTYPE, TOOL_KINDS, ClaudeBackend, ClaudeParser
from subagent_host.backends.events import ToolKind, input_summary, summary_of
from subagent_host.backends.interactive.base import (
    Approvals,
    Delivery,
    DeliveryState,
    MessageDelivered,
    OptionKind,
    PermissionAsked,
    PermissionOption,
    PermissionWithdrawn,
    ProtocolFailure,
    Reaction,
    TurnEnded,
    TurnStarted,
    Write,
)
from subagent_host.backends.jsonlines import json_object
from subagent_host.backends.reports import short

STREAM_ARGS: Final = (
    "-p",
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "--replay-user-messages",
)
INTERRUPTED: Final = "interrupted"
INTERRUPTED_SUBTYPE: Final = "error_during_execution"
# A `result`'s subtype as a stop reason; any other failure is `error`.
STOP_REASONS: Final[Mapping[str, str]] = {
    MAX_TURNS_SUBTYPE: "max_turns",
    "error_max_budget_usd": "max_budget",
}
OPTIONS: Final = (
    PermissionOption("allow-once", "Allow once", OptionKind.ALLOW_ONCE),
    PermissionOption("allow-always", "Allow always in this session", OptionKind.ALLOW_ALWAYS),
    PermissionOption("reject-once", "Reject", OptionKind.REJECT_ONCE),
    PermissionOption("reject-always", "Reject always", OptionKind.REJECT_ALWAYS),
)
REJECTED_MESSAGE: Final = "The user refused this tool use."
UNHANDLED: Final = "not handled by this client"
WITHDRAWN: Final = "claude withdrew it"
TURN_ENDED: Final = "its turn ended"


def interactive_launch(backend: ClaudeBackend, item: ItemSpec, approvals: Approvals) -> Launch:
    """The interactive child of `item`: what its one-shot launch says of model, tools,
    session and instructions, talked to on stdin (nothing written at start)."""
    ask = approvals is not Approvals.CLI
    argv = [backend.executable, *STREAM_ARGS, *backend.session_args(item, ask=ask)]
    return Launch(argv=tuple(argv), stdin=None, env=dict(item.env), cwd=item.cwd)


def new_message_uuid() -> str:
    return str(uuid.uuid4())


@attrs.frozen
class _Permission:
    """A `can_use_tool` request waiting for its answer."""

    tool_input: dict[str, Any]
    always_rules: tuple[dict[str, Any], ...]
    """Claude Code's suggested allow rules, made session-only (empty: none offered)."""


class ClaudeConversation:
    """One Claude Code child in `stream-json` mode (see the module docstring).

    `message_uuid` makes the `uuid` each written message carries (a recording and its
    replay in the tests use the same ones)."""

    @classmethod
    def for_item(cls, item: ItemSpec, approvals: Approvals) -> ClaudeConversation:
        """The conversation of `interactive_launch(backend, item, approvals)`: the same
        for every item (what Claude Code asks depends on its launch alone)."""
        return cls()

    def __init__(self, message_uuid: Callable[[], str] = new_message_uuid) -> None:
        self._parser = ClaudeParser()
        self._message_uuid = message_uuid
        self._running = False
        self._untaken: set[str] = set()
        """The uuids of written messages Claude Code has not printed back yet."""
        self._queue: collections.deque[tuple[str, str]] = collections.deque()
        self._interrupting = False
        self._interrupt_ids = (f"interrupt-{n}" for n in itertools.count(1))
        self._permissions: dict[str, _Permission] = {}
        self._failed = False

    @property
    def turn_running(self) -> bool:
        return self._running

    @property
    def session_id(self) -> str | None:
        """Claude Code's session, once it said which (a resume continues it)."""
        return self._parser.session_id

    def opening(self, prompt: str) -> Sequence[Reaction]:
        return self._start_turn(prompt)

    def send(
        self, message_id: str, text: str, delivery: Delivery
    ) -> tuple[Sequence[Reaction], DeliveryState]:
        if not self._running:
            return self._start_turn(text), DeliveryState.DELIVERED
        if delivery is Delivery.STEER:
            return [self._message(text)], DeliveryState.DELIVERED
        self._queue.append((message_id, text))
        return [], DeliveryState.QUEUED

    def interrupt(self) -> Sequence[Reaction]:
        if not self._running:
            return []
        self._interrupting = True
        request = {"subtype": "interrupt"}
        return [
            _write(
                {
                    "type": "control_request",
                    "request_id": next(self._interrupt_ids),
                    "request": request,
                }
            )
        ]

    def answer(self, permission_id: str, option_id: str) -> Sequence[Reaction]:
        pending = self._permissions[permission_id]
        option = next((o for o in OPTIONS if o.option_id == option_id), None)
        if option is None:
            raise ValueError(f"{option_id!r} is not an option of permission {permission_id!r}")
        del self._permissions[permission_id]
        decision: dict[str, Any]
        if option.kind in (OptionKind.ALLOW_ONCE, OptionKind.ALLOW_ALWAYS):
            decision = {"behavior": "allow", "updatedInput": pending.tool_input}
            if option.kind is OptionKind.ALLOW_ALWAYS and pending.always_rules:
                decision["updatedPermissions"] = list(pending.always_rules)
        else:
            decision = {"behavior": "deny", "message": REJECTED_MESSAGE}
        return [_success(permission_id, decision)]

    def queued(self) -> Sequence[str]:
        return [message_id for message_id, _ in self._queue]

    def on_line(self, line: bytes) -> Sequence[Reaction]:
        if self._failed or not line.strip():
            return []
        event = json_object(line)
        if event is None:
            self._failed = True
            return [
                ProtocolFailure(f"claude printed a line that is not a JSON object: {short(line)}")
            ]
        kind = event.get("type")
        reactions: list[Reaction] = []
        if kind == "control_request":
            reactions += self._on_request(event)
        elif kind == "control_cancel_request":
            request_id = str(event.get("request_id"))
            if self._permissions.pop(request_id, None) is not None:
                reactions.append(PermissionWithdrawn(request_id, WITHDRAWN))
        elif kind == "control_response":
            pass  # an interrupt's success, or our own answers printed back
        elif kind == "user" and event.get("isReplay") is True:
            self._untaken.discard(str(event.get("uuid")))
        else:
            self._parser.on_event(event)
            reactions += self._parser.events()
            if kind == "result" and self._running:
                reactions += self._end_turn(event)
        return reactions

    def _start_turn(self, text: str) -> list[Reaction]:
        self._running = True
        return [self._message(text), TurnStarted()]

    def _message(self, text: str) -> Write:
        message_uuid = self._message_uuid()
        self._untaken.add(message_uuid)
        message = {"role": "user", "content": text}
        return _write({"type": "user", "message": message, "uuid": message_uuid})

    def _end_turn(self, result: dict[str, Any]) -> list[Reaction]:
        # Claude Code no longer waits on the permissions still asked.
        reactions: list[Reaction] = [PermissionWithdrawn(p, TURN_ENDED) for p in self._permissions]
        reactions.append(TurnEnded(self._stop_reason(result)))
        self._interrupting = False
        self._permissions.clear()
        if self._untaken:
            reactions.append(TurnStarted())  # it starts a turn for them itself
        elif self._queue:
            message_id, text = self._queue.popleft()
            reactions += [*self._start_turn(text), MessageDelivered(message_id)]
        else:
            self._running = False
        return reactions

    def _stop_reason(self, result: dict[str, Any]) -> str:
        subtype = result.get("subtype")
        if subtype == INTERRUPTED_SUBTYPE and self._interrupting:
            return INTERRUPTED
        if subtype == "success":
            return "error" if result.get("is_error") is True else "end_turn"
        return STOP_REASONS.get(str(subtype), "error")

    def _on_request(self, event: dict[str, Any]) -> list[Reaction]:
        request_id = event.get("request_id")
        if not isinstance(request_id, str):
            return []  # nothing to answer it by: Claude Code never sends one
        request = event.get("request")
        request = request if isinstance(request, dict) else {}
        subtype = request.get("subtype")
        if subtype != "can_use_tool" or not isinstance(request.get("input"), dict):
            error = f"{short(subtype)}: {UNHANDLED}"
            return [
                _write(
                    {
                        "type": "control_response",
                        "response": {"subtype": "error", "request_id": request_id, "error": error},
                    }
                )
            ]
        tool_input: dict[str, Any] = request["input"]
        name = short(request.get("tool_name"))
        kind, keys = TOOL_KINDS.get(name, (ToolKind.OTHER, ()))
        summary = input_summary(tool_input, keys) or summary_of(request.get("description")) or name
        self._permissions[request_id] = _Permission(tool_input, _always_rules(request))
        tool_id = request.get("tool_use_id")
        tool_id = short(tool_id) if tool_id is not None else None
        return [PermissionAsked(request_id, tool_id, name, kind, summary, OPTIONS)]


def _always_rules(request: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The allow rules Claude Code suggests for a request, for this session only."""
    suggestions = request.get("permission_suggestions")
    return tuple(
        {**suggestion, "destination": "session"}
        for suggestion in (suggestions if isinstance(suggestions, list) else ())
        if isinstance(suggestion, dict) and suggestion.get("behavior", "allow") == "allow"
    )


def _success(request_id: str, response: dict[str, Any]) -> Write:
    body = {"subtype": "success", "request_id": request_id, "response": response}
    return _write({"type": "control_response", "response": body})


def _write(message: dict[str, Any]) -> Write:
    return Write(json.dumps(message).encode("ascii") + b"\n")
