"""A conversation with codex's `app-server`: JSON-RPC over stdio, one message a line.

Checked with codex-cli 0.171.0 (its protocol is what `codex app-server
generate-json-schema --out DIR` writes). The lines are JSON-RPC 2.0 without the
`"jsonrpc"` member. The launch is

    codex app-server -c sandbox_mode="MODE"
          [-c sandbox_workspace_write.network_access=BOOL] [-c web_search="disabled"]
          [-c model_reasoning_effort="LEVEL"] [-c developer_instructions="..."]
          [lean switches]

with the sandbox tiers, thinking, instructions and lean switches of the one-shot
`codex exec` launch (backends/codex.py); the model provider is the one
`$CODEX_HOME/config.toml` names, as for `codex exec`. The thread is told the working
directory, the model, the sandbox mode again, and the approval policy: `never`,
codex's one-shot behaviour, for approvals `cli`; `untrusted` when the host answers
approvals (`client`, `policy`). The thread's id is the conversation's `session_id`.

What the conversation writes and reads, in order:

    → {"id":0,"method":"initialize","params":{"clientInfo":{...}}}
    ← {"id":0,"result":{...}}
    → {"method":"initialized"}
    → {"id":1,"method":"thread/start","params":{cwd, model, approvalPolicy, sandbox}}
      (`thread/resume {threadId, ...}` for a resumed session)
    ← {"id":1,"result":{"thread":{"id":THREAD,...},...}}
    → {"id":2,"method":"turn/start","params":{threadId, input:[{type:"text",text}]}}
    ← {"id":2,"result":{"turn":{"id":TURN,...}}}
    ← turn/started, item/started, item/agentMessage/delta, item/completed,
      thread/tokenUsage/updated, ..., turn/completed {turn:{id,status}}

- A turn ends with `turn/completed`; its `status` is `completed` (stop reason
  `end_turn`), `interrupted` or `failed` (`error`). An error answering a `turn/start`
  refuses that turn's messages: a `MessageRefused` for each (the first prompt's id
  is `opening`), then `TurnEnded("error")`, and the queued messages go next.
- A follow-up is another `turn/start` on the thread once the turn ended; messages
  queued meanwhile go together, as one turn's input.
- Steer: `turn/steer {threadId, expectedTurnId, input}` joins the running turn. When
  the turn ended before codex read it (it answers an error, e.g. -32600 "no active
  turn to steer"), the message is written again as the next turn's input.
- Interrupt: `turn/interrupt {threadId, turnId}` → `turn/completed` with status
  `interrupted`. codex does not always end the command its turn was running: one
  interrupted in its first moments it ends, but one that has run a while (codex has
  announced it with `item/started` by then, and waits for it in the background) goes
  on, sandboxed under `codex-linux-sandbox` and `bwrap --new-session` (a session and
  process group of its own), and never gets its `item/completed`. So every
  interrupted turn ends with a `TurnEndedLeavingCommands` (base.py's `TurnEnded` that
  names tools left running) naming the commands codex announced and did not finish
  (possibly none, and possibly one codex did end); whatever is left is a descendant
  of the codex process, which is how the supervision's tree tracking finds and ends
  it. codex reports no OS process id: a command item's `processId` is codex's own
  handle of its PTY session, and comes only with `item/completed` anyway.
- Approvals: with `approvalPolicy: "untrusted"` codex asks before every command it
  does not know to be harmless with the request `item/commandExecution/
  requestApproval {itemId, command, ...}` (ids from 0), and before a patch with
  `item/fileChange/requestApproval {itemId, reason?}`. Each becomes a
  `PermissionAsked`; its options are codex's decisions: `accept` (allow-once),
  `acceptForSession` (allow-always), `decline` (reject-once: the turn goes on) and
  `cancel` (reject, and codex ends the turn `interrupted`). The answer is
  `{"id":ID,"result":{"decision":OPTION}}`. A request codex resolves itself (an
  interrupt) is announced by `serverRequest/resolved {requestId}` and is no longer
  pending: a `PermissionWithdrawn` says so, as it does for each request still open
  when its turn ends. Approving does not lift the sandbox: a read-only sandbox still refuses
  the write. `approvalPolicy: "never"` asks nothing (the CLI's own behaviour).
- Any other request codex sends gets a JSON-RPC error at once (-32601), so that it
  never waits for an answer that will not come.
- Agent events: `item/agentMessage/delta` is streamed text; an `agentMessage`
  item's `item/completed` ends a model response (its whole text stands in when no
  delta came). Tool items (`commandExecution`, `fileChange`, `mcpToolCall`,
  `webSearch`, ...) start with `item/started` and end with `item/completed`
  (`status` `failed` or `declined`, or a nonzero `exitCode`, is an error), named
  and summarised as backends/codex.py names the `exec --json` items.
  `thread/tokenUsage/updated`'s `total` is the child's usage so far.
- Everything else codex says (`thread/status/changed`, `account/rateLimits/updated`,
  `configWarning`, `mcpServer/startupStatus/updated`, ...) is ignored: codex adds
  notifications often. A line that is not a JSON object is a `ProtocolFailure`, as is
  an error answering `initialize` or `thread/start`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from subagent_host.backends.base import ItemSpec, Launch
from subagent_host.backends.codex import (
    SANDBOX_CONFIG,
    SANDBOX_MODES,
    TOOL_ITEMS,
    CodexBackend,
    model_id,
    sandbox_tier,
    session_options,
    tell_tool,
    tool_kind,
    usage_of,
)
from subagent_host.backends.events import TOOL_ID_CHARS, NormalizedEvents, summary_of
from subagent_host.backends.interactive.base import (
    OPENING,
    Approvals,
    Delivery,
    DeliveryState,
    LeftRunning,
    MessageDelivered,
    MessageRefused,
    OptionKind,
    PermissionAsked,
    PermissionOption,
    PermissionWithdrawn,
    ProtocolFailure,
    Reaction,
    TurnEnded,
    TurnEndedLeavingCommands,
    TurnStarted,
    Write,
)
from subagent_host.backends.jsonlines import json_object
from subagent_host.backends.reports import short
from subagent_host.values.facts import Usage

CLIENT_INFO: Final = {"name": "subagent-host", "title": "subagent-host", "version": "1"}
ASK: Final = "untrusted"
"""The approval policy of a child whose tools are approved by the host: codex asks
before every command it does not know to be harmless, and before every patch."""
NEVER: Final = "never"
"""codex's own behaviour, as `codex exec` runs: nothing waits for an answer."""
METHOD_NOT_FOUND: Final = -32601
ERROR_CHARS: Final = 500  # of codex's error message, in a failure's reason
# The app-server's item types, as `exec --json` names them (backends/codex.py's tables
# and summaries are written for those).
EXEC_ITEM_TYPES: Final[Mapping[str, str]] = {
    "commandExecution": "command_execution",
    "fileChange": "file_change",
    "webSearch": "web_search",
    "mcpToolCall": "mcp_tool_call",
    "collabAgentToolCall": "collab_tool_call",
}
COMMAND_APPROVAL: Final = "item/commandExecution/requestApproval"
FILE_CHANGE_APPROVAL: Final = "item/fileChange/requestApproval"
OPTIONS: Final = (
    PermissionOption("accept", "Allow", OptionKind.ALLOW_ONCE),
    PermissionOption("acceptForSession", "Allow for this session", OptionKind.ALLOW_ALWAYS),
    PermissionOption("decline", "Reject", OptionKind.REJECT_ONCE),
    PermissionOption("cancel", "Reject and end the turn", OptionKind.REJECT_ONCE),
)
STOP_REASONS: Final[Mapping[str, str]] = {
    "completed": "end_turn",
    "interrupted": "interrupted",
    "failed": "error",
}


WITHDRAWN: Final = "codex resolved it itself"
TURN_ENDED: Final = "its turn ended"


def interactive_launch(backend: CodexBackend, item: ItemSpec, approvals: Approvals) -> Launch:
    """codex's app-server for the item: the tier's sandbox and the item's own options,
    as `codex exec` gets them; nothing on stdin but the conversation. (Whether codex
    asks is the thread's approval policy: `CodexAppConversation.for_item`.)"""
    tier = sandbox_tier(item)
    argv = [backend.executable, "app-server", "-c", f'sandbox_mode="{SANDBOX_MODES[tier]}"']
    argv += [*SANDBOX_CONFIG[tier], *session_options(item)]
    return Launch(argv=tuple(argv), stdin=None, env=dict(item.env), cwd=item.cwd)


class CodexAppConversation:
    """One `codex app-server` child's conversation (see the module's docstring)."""

    def __init__(
        self,
        *,
        cwd: str,
        model: str | None = None,
        sandbox: str = "workspace-write",
        approval_policy: str = NEVER,
        resume_thread: str | None = None,
    ) -> None:
        self._thread_params: dict[str, Any] = {
            "cwd": cwd,
            "approvalPolicy": approval_policy,
            "sandbox": sandbox,
        }
        if model is not None:
            self._thread_params["model"] = model
        self._resume_thread = resume_thread
        self._next_id = 0
        self._requests: dict[int, str] = {}  # our requests' ids, by the method asked
        self._steers: dict[int, tuple[str, str]] = {}  # a steer's id: (message id, text)
        self._turn_messages: dict[int, tuple[str, ...]] = {}  # a turn/start's id: message ids
        self._prompt: str | None = None
        self._thread_id: str | None = None  # codex's thread, once it said it
        self._turn_running = False  # from our `turn/start` until `turn/completed`
        self._turn_id: str | None = None
        self._interrupt_wanted = False  # asked before codex said the turn's id
        self._queue: list[tuple[str, str]] = []  # (message id, text)
        self._permissions: dict[str, int | str] = {}  # codex's request ids, as it wrote them
        self._items: dict[str, dict[str, Any]] = {}  # tool items started, by id
        self._abandoned: set[str] = set()  # tool items a turn ended without
        self._streamed: set[str] = set()  # agent messages whose text came in deltas
        self._events = NormalizedEvents()
        self._usage: Usage | None = None
        self._failed = False

    @classmethod
    def for_item(cls, item: ItemSpec, approvals: Approvals) -> CodexAppConversation:
        """The conversation of `interactive_launch(backend, item, approvals)`: codex asks
        before its tools run unless `approvals` is `cli` (then it never asks)."""
        return cls(
            cwd=item.cwd,
            model=model_id(item),
            sandbox=SANDBOX_MODES[sandbox_tier(item)],
            approval_policy=NEVER if approvals is Approvals.CLI else ASK,
            resume_thread=item.resume_session,
        )

    @property
    def turn_running(self) -> bool:
        return self._turn_running

    @property
    def session_id(self) -> str | None:
        """codex's thread (the session a resume continues), once it said it."""
        return self._thread_id

    def opening(self, prompt: str) -> Sequence[Reaction]:
        # The prompt's turn starts once codex answered the handshake and the thread.
        self._prompt = prompt
        self._turn_running = True  # what is sent meanwhile waits for that turn's end
        return [self._request("initialize", {"clientInfo": CLIENT_INFO})]

    def on_line(self, line: bytes) -> Sequence[Reaction]:
        if self._failed or not line.strip():
            return []
        message = json_object(line)
        if message is None:
            return self._fail(
                f"codex app-server printed a line that is not a JSON object: {short(line)}"
            )
        method, has_id = message.get("method"), "id" in message
        if isinstance(method, str) and has_id:
            return self._on_request(message["id"], method, message.get("params"))
        if isinstance(method, str):
            return self._on_notification(method, message.get("params"))
        if has_id:
            return self._on_response(message)
        return []

    def send(
        self, message_id: str, text: str, delivery: Delivery
    ) -> tuple[Sequence[Reaction], DeliveryState]:
        if not self._turn_running and self._thread_id is not None:
            return [self._start_turn([(message_id, text)])], DeliveryState.DELIVERED
        if delivery is Delivery.STEER and self._turn_id is not None and self._thread_id:
            params = {
                "threadId": self._thread_id,
                "expectedTurnId": self._turn_id,
                "input": _input([text]),
            }
            write = self._request("turn/steer", params)
            self._steers[self._next_id - 1] = (message_id, text)
            return [write], DeliveryState.DELIVERED
        # No turn codex could take it into yet (or a queued message): the next turn's.
        self._queue.append((message_id, text))
        return [], DeliveryState.QUEUED

    def interrupt(self) -> Sequence[Reaction]:
        if not self._turn_running:
            return []
        if self._turn_id is None or self._thread_id is None:
            self._interrupt_wanted = True  # written once codex says which turn runs
            return []
        return [self._interrupt_turn()]

    def answer(self, permission_id: str, option_id: str) -> Sequence[Reaction]:
        request_id = self._permissions[permission_id]  # KeyError: not pending
        if option_id not in {option.option_id for option in OPTIONS}:
            raise ValueError(f"codex did not offer {option_id!r}")
        del self._permissions[permission_id]
        return [_write({"id": request_id, "result": {"decision": option_id}})]

    def queued(self) -> Sequence[str]:
        return [message_id for message_id, _ in self._queue]

    @property
    def usage(self) -> Usage | None:
        """The child's tokens so far (codex's thread total), once it said any."""
        return self._usage

    def _on_response(self, message: dict[str, Any]) -> list[Reaction]:
        request_id = message.get("id")
        if not isinstance(request_id, int) or request_id not in self._requests:
            return []  # not ours: nothing waits for it
        method = self._requests.pop(request_id)
        steered = self._steers.pop(request_id, None)
        messages = self._turn_messages.pop(request_id, ())
        error = message.get("error")
        if error is not None:
            return self._on_error(method, _error_text(error), steered, messages)
        result = message.get("result")
        result = result if isinstance(result, dict) else {}
        if method == "initialize":
            notice = _write({"method": "initialized"})
            if self._resume_thread is not None:
                params = {"threadId": self._resume_thread, **self._thread_params}
                return [notice, self._request("thread/resume", params)]
            return [notice, self._request("thread/start", self._thread_params)]
        if method in ("thread/start", "thread/resume"):
            thread = result.get("thread")
            thread_id = thread.get("id") if isinstance(thread, dict) else None
            if not isinstance(thread_id, str):
                return self._fail(f"codex's {method} answer names no thread")
            self._thread_id = thread_id
            return [self._start_turn([(OPENING, self._prompt or "")])]
        if method == "turn/start":
            turn = result.get("turn")
            if isinstance(turn, dict) and isinstance(turn.get("id"), str):
                return self._turn_known(turn["id"])
        return []

    def _on_error(
        self,
        method: str,
        reason: str,
        steered: tuple[str, str] | None,
        messages: tuple[str, ...],
    ) -> list[Reaction]:
        if method in ("initialize", "thread/start", "thread/resume"):
            return self._fail(f"codex refused {method}: {reason}")
        if method == "turn/start":
            # codex refused the turn's messages; no turn began: it waits for input again.
            self._turn_running, self._turn_id = False, None
            refused = [MessageRefused(message_id, reason) for message_id in messages]
            return [*refused, TurnEnded("error"), *self._deliver_queue()]
        if steered is not None:
            # The turn ended before codex read it: it opens the next turn instead.
            if self._turn_running:
                self._queue.insert(0, steered)
                return []
            return [self._start_turn([steered])]
        return []  # an interrupt that came too late: the turn ended anyway

    def _on_request(self, request_id: object, method: str, params: object) -> list[Reaction]:
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            return []  # no id an answer could carry
        params = params if isinstance(params, dict) else {}
        if method in (COMMAND_APPROVAL, FILE_CHANGE_APPROVAL):
            permission_id = str(request_id)
            self._permissions[permission_id] = request_id
            return [self._permission(permission_id, method, params)]
        error = {"code": METHOD_NOT_FOUND, "message": f"{short(method)} is not supported"}
        return [_write({"id": request_id, "error": error})]

    def _permission(
        self, permission_id: str, method: str, params: dict[str, Any]
    ) -> PermissionAsked:
        item_id = params.get("itemId")
        tool_id = short(item_id, TOOL_ID_CHARS) if isinstance(item_id, str) else None
        item = self._items.get(item_id) if isinstance(item_id, str) else None
        if method == COMMAND_APPROVAL:
            exec_item = {"type": "command_execution", "command": params.get("command")}
        else:
            exec_item = _exec_shape(item) if item is not None else {"type": "file_change"}
        kind, summary = tool_kind(exec_item)
        if summary is None:
            summary = summary_of(params.get("reason"))
        name = TOOL_ITEMS[str(exec_item["type"])]
        return PermissionAsked(permission_id, tool_id, name, kind, summary or "", OPTIONS)

    def _on_notification(self, method: str, params: object) -> list[Reaction]:
        params = params if isinstance(params, dict) else {}
        if method == "turn/started":
            turn = params.get("turn")
            started: list[Reaction] = [TurnStarted()]
            if isinstance(turn, dict) and isinstance(turn.get("id"), str):
                return [*started, *self._turn_known(turn["id"])]
            return started
        if method == "turn/completed":
            turn = params.get("turn")
            return self._turn_completed(turn if isinstance(turn, dict) else {})
        if method in ("item/started", "item/completed"):
            item = params.get("item")
            if isinstance(item, dict):
                self._on_item(item, completed=method == "item/completed")
            return self._drain()
        if method == "item/agentMessage/delta":
            delta, item_id = params.get("delta"), params.get("itemId")
            if isinstance(delta, str) and isinstance(item_id, str):
                self._streamed.add(item_id)
                self._events.text(delta)
            return self._drain()
        if method == "thread/tokenUsage/updated":
            self._on_usage(params.get("tokenUsage"))
            return self._drain()
        if method == "serverRequest/resolved":
            # codex settled it itself (an interrupt): no answer is awaited any more.
            permission_id = str(params.get("requestId"))
            if self._permissions.pop(permission_id, None) is not None:
                return [PermissionWithdrawn(permission_id, WITHDRAWN)]
        return []

    def _on_item(self, item: dict[str, Any], *, completed: bool) -> None:
        kind, item_id = item.get("type"), item.get("id")
        if kind == "agentMessage":
            if completed:
                text = item.get("text")
                if item_id not in self._streamed and isinstance(text, str):
                    self._events.text(text)
                self._streamed.discard(item_id)
                self._events.end_response()
            return
        exec_item = _exec_shape(item)
        name = TOOL_ITEMS.get(exec_item["type"])
        if exec_item["type"] == "mcp_tool_call":
            name = f"mcp {short(item.get('server'))}.{short(item.get('tool'))}"
        if name is None or not isinstance(item_id, str) or item_id in self._abandoned:
            return  # a command a turn left running may yet complete: it was told ended
        if completed:
            self._items.pop(item_id, None)
        else:
            self._items[item_id] = item
        tell_tool(self._events, exec_item, name, completed=completed)

    def _on_usage(self, token_usage: object) -> None:
        total = token_usage.get("total") if isinstance(token_usage, dict) else None
        if not isinstance(total, dict):
            return
        names = ("inputTokens", "outputTokens", "cachedInputTokens", "cacheWriteInputTokens")
        counts = [total.get(name, 0) for name in names]
        if all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
            self._usage = usage_of(*counts)

    def _turn_known(self, turn_id: str) -> list[Reaction]:
        """codex said which turn runs (its `turn/start` answer or `turn/started`)."""
        if not self._turn_running or self._turn_id == turn_id:
            return []
        self._turn_id = turn_id
        if self._interrupt_wanted:
            self._interrupt_wanted = False
            return [self._interrupt_turn()]
        return []

    def _turn_completed(self, turn: dict[str, Any]) -> list[Reaction]:
        status = turn.get("status")
        reason = STOP_REASONS.get(status, short(status)) if isinstance(status, str) else "error"
        left = tuple(
            LeftRunning(short(item_id, TOOL_ID_CHARS), tool_kind(_exec_shape(item))[1])
            for item_id, item in self._items.items()
            if item.get("type") == "commandExecution"
        )
        self._abandoned.update(self._items)
        for item_id in self._items:
            # Its result will never reach the model: the call ended with the turn.
            self._events.tool_ended(item_id, is_error=True)
        self._items.clear()
        # codex answers its own requests when a turn ends.
        withdrawn = [PermissionWithdrawn(p, TURN_ENDED) for p in self._permissions]
        self._permissions.clear()
        self._events.end_response()
        self._turn_running, self._turn_id, self._interrupt_wanted = False, None, False
        leaves = left or reason == STOP_REASONS["interrupted"]
        ended = TurnEndedLeavingCommands(reason, left) if leaves else TurnEnded(reason)
        return [*self._drain(), *withdrawn, ended, *self._deliver_queue()]

    def _deliver_queue(self) -> list[Reaction]:
        """The queued messages, together, as the next turn's input."""
        if not self._queue or self._thread_id is None:
            return []
        queued, self._queue = self._queue, []
        delivered = [MessageDelivered(message_id) for message_id, _ in queued]
        return [self._start_turn(queued), *delivered]

    def _start_turn(self, messages: list[tuple[str, str]]) -> Write:
        """A turn for `messages` ((message id, text) each), as one input."""
        self._turn_running, self._turn_id = True, None
        params = {"threadId": self._thread_id, "input": _input([text for _, text in messages])}
        self._turn_messages[self._next_id] = tuple(message_id for message_id, _ in messages)
        return self._request("turn/start", params)

    def _interrupt_turn(self) -> Write:
        return self._request(
            "turn/interrupt", {"threadId": self._thread_id, "turnId": self._turn_id}
        )

    def _request(self, method: str, params: Mapping[str, Any]) -> Write:
        request_id, self._next_id = self._next_id, self._next_id + 1
        self._requests[request_id] = method
        return _write({"id": request_id, "method": method, "params": params})

    def _drain(self) -> list[Reaction]:
        return list(self._events.drain(self._usage))

    def _fail(self, reason: str) -> list[Reaction]:
        self._failed = True
        return [ProtocolFailure(reason)]


def _exec_shape(item: Mapping[str, Any]) -> dict[str, Any]:
    """An app-server item in `exec --json`'s shape, which backends/codex.py reads."""
    kind = item.get("type")
    shaped = dict(item)
    shaped["type"] = EXEC_ITEM_TYPES.get(kind, kind) if isinstance(kind, str) else None
    shaped["exit_code"] = item.get("exitCode")
    return shaped


def _input(texts: list[str]) -> list[dict[str, str]]:
    return [{"type": "text", "text": text} for text in texts]


def _write(message: Mapping[str, Any]) -> Write:
    return Write(json.dumps(message).encode() + b"\n")


def _error_text(error: object) -> str:
    message = error.get("message") if isinstance(error, dict) else None
    return short(message, ERROR_CHARS) if isinstance(message, str) else "an error"
