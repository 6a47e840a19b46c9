"""A conversation with any agent that speaks the Agent Client Protocol (ACP), as its client.

ACP is JSON-RPC 2.0 over the agent's stdio, one message a line. The launch is the
configured executable and arguments (`interactive_launch`), nothing on stdin but the
conversation. The messages are read and written with the official Python SDK's schema
models (`agent-client-protocol`, the `acp` extra: `acp.schema`), so what the agent says
is validated as the spec's version the SDK pins says it, and what we write is built from
the same models. The SDK's own connection (`acp.connect_to_agent`, `ClientSideConnection`)
is not used: it wants to own the agent's streams and run its own reader task, while here
the server's supervisor owns the child's pipes (its limits, caps and shutdown) and a
`Conversation` is sans-I/O (backends/interactive/base.py). The SDK (and pydantic) is
imported by this module only, which nothing loads before an ACP child is driven.

What the conversation writes and reads, in order:

    → initialize {protocolVersion: 1, clientCapabilities: {fs: {readTextFile: false,
                  writeTextFile: false}, terminal: false}}
    ← {protocolVersion: 1, agentCapabilities: {loadSession, ...}, agentInfo,
       authMethods, ...}
    → session/new {cwd, mcpServers: []}  (session/load {sessionId, cwd, mcpServers: []}
                                          to resume)
   (← error auth_required (-32000)        only when the agent asks for it:
    → authenticate {methodId}             an `env_var` method the child's environment
    ← {}                                  provides, then the session request again)
    ← {sessionId, modes?: {currentModeId, availableModes}, ...}
    → session/set_mode {sessionId, modeId}  (only when a mode was asked for, or the
                                             host answers approvals: `asking_mode`)
    → session/prompt {sessionId, prompt: [{type: "text", text}]}
    ← session/update notifications ..., requests of the agent ...
    ← {stopReason: "end_turn" | "cancelled" | "max_tokens" | ...}

- The client offers no `fs` and no `terminal`: the agent uses its own tools, inside the
  child's cwd. An answer to `initialize` naming another protocol version than 1, or an
  error answering `initialize`, `session/new`, `session/load` or `session/set_mode`, is
  a `ProtocolFailure` naming it. A resume (`resume_session`) of an agent that does not
  declare `loadSession` is a `ProtocolFailure` naming `resume-unsupported`.
- Authentication only where the agent asks for it: `session/new` or `session/load`
  answered with the error `auth_required` (-32000). Then the first of the agent's
  `authMethods` (in its order) of type `env_var` whose required (not `optional`)
  variables are all among the names the child runs with (`env_names`: the child's
  whole environment, never its values) is sent as `authenticate {methodId}`, and once
  that is answered the session request is sent again, once. None such, `authenticate`
  refused, or the session refused `auth_required` again: a `ProtocolFailure` naming
  `auth-required`, the methods the agent offers and the variables each needs. Methods of
  type `agent` (the agent's own sign-in) and `terminal` (an interactive login) are never
  used: the host has no person and no terminal to run them.
- A turn is one `session/prompt`: `TurnStarted` when it is written, `TurnEnded` when
  its answer comes, with its `stopReason` (`cancelled` is `interrupted`; others as they
  are). An error answering it refuses the message (`MessageRefused`, `opening` for the
  first prompt) and ends the turn `error`. Tools announced and not finished when a turn
  ends are told ended (with an error) and named in a `TurnEndedLeavingCommands`.
- `send` with no turn running writes a new `session/prompt` (`delivered`); while one
  runs the message is kept (`queued`) and written as the next prompt when the turn
  ends (`MessageDelivered`). ACP (the SDK's schema 1.19) has no capability by which an
  agent declares that it takes a prompt into a running turn, so `steer` is queued too.
- `interrupt` is the notification `session/cancel {sessionId}`; the turn ends when the
  prompt's answer comes (`cancelled`). One that comes during the handshake is written
  right after the first prompt. Permissions still pending are answered
  `{outcome: {outcome: "cancelled"}}` at once, as the spec asks of a client that
  cancels, and withdrawn.
- `session/request_permission {sessionId, toolCall, options}` is a `PermissionAsked`
  with the agent's own options (`optionId`, `name`, `kind` as `OptionKind`); `answer`
  replies `{outcome: {outcome: "selected", optionId}}`. A permission still pending when
  its turn ends is answered `cancelled` and withdrawn; one asked when no turn runs (after
  its turn's answer) is answered `cancelled` at once, and not told. ACP agents can ask, so every
  approvals (`cli`, `client`, `policy`) is taken; who answers is the supervision's.
  With `client` or `policy` (`for_item`) the session is first put in the mode that asks
  before edits and commands where the agent offers one (`asking_mode`: `default`), so
  that the host's answer decides every edit and command; with `cli` the agent keeps its
  own mode, and may still ask (Qwen's `auto` does, below). An agent that offers no
  such mode while `client` or `policy` wants one is a `ProtocolFailure` naming
  `approvals-unsupported`, before any prompt: its permissions would never be asked, and
  nothing would answer for its tools as its receipts say.
- Any other request of the agent (`fs/*`, `terminal/*`, an extension method) is
  answered -32601 at once, so the agent never waits for us.
- `session/update`: `agent_message_chunk` text is `MessageText`; `tool_call` is
  `ToolStarted` (the tool's kind is ACP's own `ToolKind`, `switch_mode` read as `other`;
  its name the agent's `_meta.toolName` where it gives one, else the kind; its summary
  the call's title, bounded), and a `tool_call` or `tool_call_update` whose status is
  `completed` or `failed` is `ToolEnded` (`failed` an error). Usage the agent reports
  in a message chunk's `_meta.usage` (one model response's tokens) is summed into
  `UsageSoFar`; a prompt's answer's `usage` (unstable in the spec) is counted for a turn
  that reported none in chunks. `plan` is `PlanUpdated` (every entry: ACP's `plan`
  update replaces the plan whole);
  `agent_thought_chunk`, `user_message_chunk`, `available_commands_update`,
  `current_mode_update` and any kind the SDK does not know are not forwarded. An update
  for another session than ours is ignored: an agent may run sessions of its own, and
  nothing of them is this child's. An update we read that the SDK's model rejects, or
  a line that is not a JSON object, is a `ProtocolFailure`. The updates an agent sends
  while it answers `session/load` replay the session's history: not forwarded again.
- What the conversation never sees: a line longer than the reader's bound (8 MiB,
  backends/jsonlines.py `Lines`) is dropped whole before it (counted only in a
  `protocol-error`'s `droppedLines`), so a huge chunk is lost and the turn goes on;
  and time: an agent that never answers `initialize` (or a prompt) is waited for
  until the supervision's bounded waits end the child, and one that exits is the
  supervision's too. subagent_host/conformance/acp_agent.py plays each of these; the tests drive
  it through this conversation.

Qwen Code 0.24.4 (`qwen --acp --auth-type openai --openai-base-url URL
--openai-api-key KEY --model M`), as seen against the loopback mock LLM:

- `initialize` answers `protocolVersion: 1`, `agentInfo {name: "qwen-code", version}`,
  `agentCapabilities {loadSession: true, promptCapabilities {image, audio,
  embeddedContext}, sessionCapabilities {list, resume}, mcpCapabilities {sse, http}}`
  and one auth method (`openai`, already satisfied by the launch's arguments).
- `session/new` answers its `sessionId`, `models`, and `modes`: `plan` (analyze only),
  `default` ("Require approval for file edits or shell commands"), `auto-edit`, `auto`
  (an LLM classifier approves safe actions) and `yolo` (approve all), starting in
  `auto`. Against a model that cannot classify (the mock), `auto` asks before every
  shell command: `session/request_permission` with options `proceed_once`
  (allow_once), `proceed_once_and_switch_to_default` (allow_once) and `cancel`
  (reject_once). `session/set_mode` is answered `{}` after a notification of its own
  (`qwen/notify/session/mode-update`, ignored here).
- A tool call: `tool_call` (status `pending`, title "Shell", `kind: "execute"`,
  `_meta.toolName: "run_shell_command"`), then `tool_call_update` (`completed` or
  `failed`, with the output). Its shell tool refuses a standalone long `sleep` unless
  the command carries a `# intentional-sleep:` comment.
- Usage: in `_meta.usage` of an empty `agent_message_chunk` that ends each model
  response (`inputTokens`, `outputTokens`, `totalTokens`, `thoughtTokens`,
  `cachedReadTokens`), one response's counts, not the session's.
- Between tool batches it asks the client `craft/drainMidTurnQueue {sessionId}` (its
  way of pulling messages queued mid-turn, answered `{messages: [], hasQueuedPrompt:
  false}` by its own hosts); the -32601 answer makes it stop asking ("drain
  unsupported") and the turn goes on.
- The prompt's answer is `{stopReason, _meta: {qwen.branchPoint}}`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
import pydantic
from acp import schema

from subagent_host.backends.acp import AcpBackend
from subagent_host.backends.base import ItemSpec, Launch
from subagent_host.backends.events import (
    TOOL_ID_CHARS,
    NormalizedEvents,
    PlanEntry,
    summary_of,
)
from subagent_host.backends.interactive.acp_messages import (
    AUTH_REQUIRED_CODE,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSION,
    AuthMethod,
    auth_method_for,
    auth_methods_text,
    dump,
    error_code,
    error_text,
    initialize_request,
    result_line,
    tool_name,
    usage_of,
    validation_errors,
    write_line,
)

# The probe of a configured agent (backends/acp_probe.py) reads these from here.
from subagent_host.backends.interactive.acp_messages import initialize_line as initialize_line
from subagent_host.backends.interactive.acp_messages import read_initialize as read_initialize
from subagent_host.backends.interactive.base import (
    APPROVALS_UNSUPPORTED,
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
from subagent_host.values.choices import ACP, PlanPriority, PlanStatus
from subagent_host.values.facts import (
    Usage,
)

RESUME_UNSUPPORTED: Final = "resume-unsupported"
AUTH_REQUIRED: Final = "auth-required"
SESSION_METHODS: Final = frozenset({"session/new", "session/load"})
STOP_REASONS: Final[Mapping[str, str]] = {"end_turn": "end_turn", "cancelled": "interrupted"}
OPTION_KINDS: Final[Mapping[str, OptionKind]] = {
    "allow_once": OptionKind.ALLOW_ONCE,
    "allow_always": OptionKind.ALLOW_ALWAYS,
    "reject_once": OptionKind.REJECT_ONCE,
    "reject_always": OptionKind.REJECT_ALWAYS,
}
ENDED_STATUSES: Final = frozenset({"completed", "failed"})
ASKING_MODES: Final = ("default",)
"""Mode ids that, by the agents' own descriptions, ask before edits and commands
(Qwen Code's, Gemini CLI's and claude-agent-acp's `default`): `asking_mode` names the
first offered. codex-acp offers none: its `read-only` asks only before a command
leaves codex's sandbox and runs the others in it without asking, so it is not one: a
child of it whose approvals the host answers fails `approvals-unsupported` (§24.4)."""
CANCELLED: Final = "the turn was cancelled"
TURN_ENDED: Final = "its turn ended"
_CANCELLED: Final = schema.RequestPermissionResponse(
    outcome=schema.DeniedOutcome(outcome="cancelled")
)
APPROVALS: Final = frozenset(Approvals)
"""An ACP agent asks the client before the tools its mode says to ask for: every
approvals is taken."""


@attrs.frozen
class Mode:
    """A session mode the agent offers (ACP's `SessionMode`)."""

    mode_id: str
    name: str
    description: str | None


def interactive_launch(
    executable: str, args: Sequence[str], env: Mapping[str, str], item: ItemSpec
) -> Launch:
    """The ACP agent `executable args` for `item`, as a configured backend launches it
    (backends/acp.py)."""
    return AcpBackend(ACP, executable, tuple(args), env).prepare(item)


class AcpConversation:
    """One ACP agent child's conversation (see the module's docstring)."""

    def __init__(
        self,
        *,
        cwd: str,
        resume_session: str | None = None,
        mode: str | None = None,
        ask_before_tools: bool = False,
        instructions: str | None = None,
        env_names: frozenset[str] = frozenset(),
    ) -> None:
        self._cwd = cwd
        self._env_names = env_names  # the child's variables: what `authenticate` may use
        self._auth_methods: Sequence[AuthMethod] = ()
        self._authenticating: str | None = None  # the method sent, once: never twice
        self._session_request: tuple[str, pydantic.BaseModel] | None = None  # to retry
        # An agent definition's body: ACP has no system prompt a client may add to, so it
        # leads the first prompt, as a text block of its own (a loaded session has it).
        self._instructions = instructions if resume_session is None else None
        self._resume_session = resume_session
        self._mode = mode  # set with `session/set_mode` before the first prompt
        self._ask_before_tools = ask_before_tools  # else: the agent's asking mode, if any
        self._next_id = 0
        self._requests: dict[int, str] = {}  # our requests' ids: the method asked
        self._prompts: dict[int, str] = {}  # a session/prompt's id: its message id
        self._prompt = ""
        self._session_id: str | None = None
        self._turn_running = False
        self._cancel_sent = False
        self._cancel_wanted = False  # an interrupt came before the prompt was written
        self._queue: deque[tuple[str, str]] = deque()  # (message id, text)
        self._permissions: dict[str, tuple[int | str, frozenset[str]]] = {}
        self._tools: dict[str, str] = {}  # tool calls started and not ended: their summary
        self._events = NormalizedEvents()
        self._usage: Usage | None = None
        self._turn_usage_seen = False  # a chunk of this turn reported usage
        self._failed = False
        self._loading = False  # session/load asked, not answered: its replay is history
        self.agent_info: Mapping[str, Any] | None = None
        """The agent's `agentInfo` (name, title, version), once it answered `initialize`."""
        self.load_session = False
        """Whether the agent declared `loadSession` (it can resume a session)."""
        self.modes: tuple[Mode, ...] = ()
        """The session modes the agent offers, once it answered `session/new`."""
        self.current_mode: str | None = None
        """The session's mode, as the agent last said it."""

    @classmethod
    def for_item(cls, item: ItemSpec, approvals: Approvals) -> AcpConversation:
        """The conversation of `interactive_launch(..., item)`: any approvals is taken
        (whoever answers the agent's permission requests is the supervision's
        business). With `client` or `policy` the session is put in the agent's mode
        that asks before edits and commands, where it offers one (`asking_mode`); with
        `cli` the agent stays in its own mode."""
        ask = approvals is not Approvals.CLI
        return cls(
            cwd=item.cwd,
            resume_session=item.resume_session,
            ask_before_tools=ask,
            instructions=item.instructions,
            env_names=item.env_names,
        )

    @property
    def turn_running(self) -> bool:
        return self._turn_running

    @property
    def session_id(self) -> str | None:
        """The agent's session (what `session/load` continues), once it said it."""
        return self._session_id

    @property
    def usage(self) -> Usage | None:
        """The child's tokens so far, summed from what the agent reported."""
        return self._usage

    def asking_mode(self) -> str | None:
        """The offered mode that asks before edits and commands, if any (ASKING_MODES)."""
        offered = {mode.mode_id for mode in self.modes}
        return next((mode for mode in ASKING_MODES if mode in offered), None)

    def opening(self, prompt: str) -> Sequence[Reaction]:
        # The prompt's turn starts once the agent answered the handshake and the session.
        self._prompt = prompt
        self._turn_running = True  # what is sent meanwhile waits for that turn's end
        return [self._request("initialize", initialize_request())]

    def on_line(self, line: bytes) -> Sequence[Reaction]:
        if self._failed or not line.strip():
            return []
        message = json_object(line)
        if message is None:
            return self._fail(
                "the ACP agent printed a line that is not a JSON object: "
                + short(line.decode("utf-8", "replace"))
            )
        method, has_id = message.get("method"), "id" in message
        try:
            if isinstance(method, str) and has_id:
                return self._on_request(message["id"], method, message.get("params"))
            if isinstance(method, str):
                return self._on_notification(method, message.get("params"))
            if has_id:
                return self._on_response(message)
        except pydantic.ValidationError as error:
            what = method if isinstance(method, str) else "an answer"
            return self._fail(
                f"the ACP agent's {short(what)} is not ACP's: {validation_errors(error)}"
            )
        return []

    def send(
        self, message_id: str, text: str, delivery: Delivery
    ) -> tuple[Sequence[Reaction], DeliveryState]:
        del delivery  # no agent can declare it takes a prompt mid-turn: both wait
        if not self._turn_running and self._session_id is not None:
            return self._start_turn(text, message_id), DeliveryState.DELIVERED
        self._queue.append((message_id, text))
        return [], DeliveryState.QUEUED

    def interrupt(self) -> Sequence[Reaction]:
        if not self._turn_running or self._cancel_sent or self._cancel_wanted:
            return []
        if self._session_id is None or not self._prompts:
            self._cancel_wanted = True  # the handshake is still going: after the prompt
            return []
        return self._cancel()

    def _cancel(self) -> list[Reaction]:
        assert self._session_id is not None
        self._cancel_sent, self._cancel_wanted = True, False
        cancel = schema.CancelNotification(session_id=self._session_id)
        return [
            write_line({"method": "session/cancel", "params": dump(cancel)}),
            *self._withdraw(CANCELLED),
        ]

    def answer(self, permission_id: str, option_id: str) -> Sequence[Reaction]:
        request_id, offered = self._permissions[permission_id]  # KeyError: not pending
        if option_id not in offered:
            raise ValueError(f"the agent did not offer {option_id!r}")
        del self._permissions[permission_id]
        outcome = schema.AllowedOutcome(outcome="selected", option_id=option_id)
        return [result_line(request_id, schema.RequestPermissionResponse(outcome=outcome))]

    def queued(self) -> Sequence[str]:
        return [message_id for message_id, _ in self._queue]

    def _on_response(self, message: dict[str, Any]) -> list[Reaction]:
        request_id = message.get("id")
        if not isinstance(request_id, int) or request_id not in self._requests:
            return []  # not ours: nothing waits for it
        method = self._requests.pop(request_id)
        message_id = self._prompts.pop(request_id, None)
        error = message.get("error")
        if error is not None:
            reason = error_text(error)
            if message_id is not None:
                return self._refused(message_id, reason)
            if method in SESSION_METHODS and error_code(error) == AUTH_REQUIRED_CODE:
                return self._auth_required(method)
            if method == "authenticate":
                return self._auth_failed(
                    f"it refused authenticate {self._authenticating}: {reason}"
                )
            return self._fail(f"the ACP agent refused {method}: {reason}")
        result = message.get("result")
        result = result if isinstance(result, dict) else {}
        if method == "authenticate" and self._session_request is not None:
            # Authenticated: the session request it refused, once more.
            return [self._request(*self._session_request)]
        if method == "initialize":
            return self._initialized(schema.InitializeResponse.model_validate(result))
        if method == "session/new":
            answer = schema.NewSessionResponse.model_validate(result)
            self._session_id = answer.session_id
            return self._session_ready(answer.modes)
        if method == "session/load":
            loaded = schema.LoadSessionResponse.model_validate(result)
            self._loading = False
            return self._session_ready(loaded.modes)
        if method == "session/set_mode":
            return self._start_turn(self._prompt, OPENING)
        if message_id is not None:
            # Read by hand, not by `PromptResponse`: a stop reason newer than the SDK's
            # list is the agent's own word, not a broken protocol.
            stop_reason = result.get("stopReason")
            usage = result.get("usage")
            return self._turn_ended(
                stop_reason if isinstance(stop_reason, str) else "end_turn",
                usage if isinstance(usage, dict) else None,
            )
        return []

    def _initialized(self, answer: schema.InitializeResponse) -> list[Reaction]:
        if answer.protocol_version != PROTOCOL_VERSION:
            return self._fail(
                f"the ACP agent speaks protocol version {answer.protocol_version}, "
                f"not {PROTOCOL_VERSION}"
            )
        info = answer.agent_info
        self.agent_info = info.model_dump(mode="json", exclude_none=True) if info else None
        capabilities = answer.agent_capabilities
        self.load_session = bool(capabilities and capabilities.load_session)
        self._auth_methods = tuple(answer.auth_methods or ())
        if self._resume_session is None:
            request = schema.NewSessionRequest(cwd=self._cwd, mcp_servers=[])
            self._session_request = ("session/new", request)
            return [self._request("session/new", request)]
        if not self.load_session:
            return self._fail(f"{RESUME_UNSUPPORTED}: the ACP agent does not declare loadSession")
        self._session_id, self._loading = self._resume_session, True
        load = schema.LoadSessionRequest(
            session_id=self._resume_session, cwd=self._cwd, mcp_servers=[]
        )
        self._session_request = ("session/load", load)
        return [self._request("session/load", load)]

    def _auth_required(self, method: str) -> list[Reaction]:
        """The agent refused the session `auth_required`: authenticated once with an
        `env_var` method the child's environment provides, else the child fails."""
        if self._authenticating is not None:
            return self._auth_failed(
                f"it still refused {method} after authenticate {self._authenticating}"
            )
        chosen = auth_method_for(self._auth_methods, self._env_names)
        if chosen is None:
            return self._auth_failed(
                f"it refused {method}, and the child's environment provides none of its "
                "env_var methods' variables"
            )
        self._authenticating = chosen
        return [self._request("authenticate", schema.AuthenticateRequest(method_id=chosen))]

    def _auth_failed(self, why: str) -> list[Reaction]:
        return self._fail(
            f"{AUTH_REQUIRED}: the ACP agent requires authentication: {why}; "
            f"{auth_methods_text(self._auth_methods)}"
        )

    def _session_ready(self, modes: schema.SessionModeState | None) -> list[Reaction]:
        if modes is not None:
            self.modes = tuple(
                Mode(mode.id, mode.name, mode.description) for mode in modes.available_modes
            )
            self.current_mode = modes.current_mode_id
        mode = self._mode or (self.asking_mode() if self._ask_before_tools else None)
        if mode is None and self._ask_before_tools:
            # Its permissions would never be asked: nothing would answer for its tools.
            offered = ", ".join(m.mode_id for m in self.modes) or "none"
            return self._fail(
                f"{APPROVALS_UNSUPPORTED}: the ACP agent offers no mode that asks before "
                f'edits and commands (its modes: {short(offered)}): only approvals "cli" '
                "can run it"
            )
        if mode is not None and mode != self.current_mode and self._session_id is not None:
            self.current_mode = mode
            request = schema.SetSessionModeRequest(session_id=self._session_id, mode_id=mode)
            return [self._request("session/set_mode", request)]
        return self._start_turn(self._prompt, OPENING)

    def _on_request(self, request_id: object, method: str, params: object) -> list[Reaction]:
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            return []  # no id an answer could carry
        if method == "session/request_permission":
            asked = schema.RequestPermissionRequest.model_validate(params)
            if asked.session_id == self._session_id and self._turn_running:
                return [self._permission(request_id, asked)]
            if asked.session_id == self._session_id:
                # Asked with no turn running: nobody is there to answer, and no tool of
                # a turn waits on it. Answered as a permission whose turn ended.
                return [result_line(request_id, _CANCELLED)]
        # Not one we take (or another session's): answered at once, so nothing waits.
        error = {"code": METHOD_NOT_FOUND, "message": f"{short(method)} is not supported"}
        return [write_line({"id": request_id, "error": error})]

    def _permission(
        self, request_id: int | str, asked: schema.RequestPermissionRequest
    ) -> PermissionAsked:
        permission_id = short(request_id, TOOL_ID_CHARS)
        options = tuple(
            PermissionOption(option.option_id, option.name, OPTION_KINDS[option.kind])
            for option in asked.options
        )
        self._permissions[permission_id] = (
            request_id,
            frozenset(option.option_id for option in options),
        )
        call = asked.tool_call
        name, kind = tool_name(call.field_meta, call.kind)
        summary = summary_of(call.title) or self._tools.get(call.tool_call_id) or ""
        tool_id = short(call.tool_call_id, TOOL_ID_CHARS)
        return PermissionAsked(permission_id, tool_id, name, kind, summary, options)

    def _on_notification(self, method: str, params: object) -> list[Reaction]:
        if method != "session/update" or not isinstance(params, dict):
            return []  # an extension notification (Qwen's `qwen/notify/...`): not ours
        if params.get("sessionId") != self._session_id or self._session_id is None:
            return []  # another session of the agent's: nothing of this child's
        if self._loading:
            return []  # the loaded session's history, replayed: told when it happened
        update = params.get("update")
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if kind == "agent_message_chunk":
            self._on_chunk(schema.AgentMessageChunk.model_validate(update))
        elif kind == "tool_call":
            self._on_tool(schema.ToolCallStart.model_validate(update))
        elif kind == "tool_call_update":
            self._on_tool(schema.ToolCallProgress.model_validate(update))
        elif kind == "plan":
            entries = schema.AgentPlanUpdate.model_validate(update).entries
            self._events.plan(
                PlanEntry(
                    content=entry.content,
                    priority=PlanPriority(entry.priority),
                    status=PlanStatus(entry.status),
                )
                for entry in entries
            )
        elif kind == "current_mode_update":
            mode = schema.CurrentModeUpdate.model_validate(update)
            self.current_mode = mode.current_mode_id
        return self._drain()

    def _on_chunk(self, chunk: schema.AgentMessageChunk) -> None:
        if isinstance(chunk.content, schema.TextContentBlock):
            self._events.text(chunk.content.text)
        usage = (chunk.field_meta or {}).get("usage")
        if isinstance(usage, dict):
            counted = usage_of(usage)
            if counted is not None:
                self._turn_usage_seen = True
                self._add_usage(counted)
                # Qwen reports a model response's usage with its last (empty) chunk.
                self._events.end_response()

    def _on_tool(self, call: schema.ToolCallStart | schema.ToolCallProgress) -> None:
        tool_id = short(call.tool_call_id, TOOL_ID_CHARS)
        if tool_id not in self._tools and (call.title is not None or call.kind is not None):
            name, kind = tool_name(call.field_meta, call.kind)
            summary = summary_of(call.title)
            self._tools[tool_id] = summary or ""
            # The text said before a tool call is the whole of its response's text (an
            # agent tells a response's end only after its calls, Qwen with its usage):
            # it is final before the call, as every CLI adapter tells it.
            self._events.end_response()
            self._events.tool_began(tool_id, name, kind, summary)
        if call.status in ENDED_STATUSES and tool_id in self._tools:
            del self._tools[tool_id]
            self._events.tool_ended(tool_id, is_error=call.status == "failed")

    def _turn_ended(self, stop_reason: str, usage: Mapping[str, Any] | None) -> list[Reaction]:
        if usage is not None and not self._turn_usage_seen:
            self._add_usage(usage_of(usage))
        reason = STOP_REASONS.get(stop_reason) or short(stop_reason) or "end_turn"
        left = tuple(
            LeftRunning(tool_id, summary or None) for tool_id, summary in self._tools.items()
        )
        for tool_id in self._tools:
            # Its result will never reach the model: the call ended with the turn.
            self._events.tool_ended(tool_id, is_error=True)
        self._tools.clear()
        self._events.end_response()
        withdrawn = self._withdraw(TURN_ENDED)
        self._turn_running = self._cancel_sent = self._turn_usage_seen = False
        ended = TurnEndedLeavingCommands(reason, left) if left else TurnEnded(reason)
        return [*self._drain(), *withdrawn, ended, *self._next_queued()]

    def _refused(self, message_id: str, reason: str) -> list[Reaction]:
        """The agent refused a prompt: its message never reached the model; the turn it
        opened ends `error` and the queue goes on."""
        self._events.end_response()
        withdrawn = self._withdraw(TURN_ENDED)
        self._turn_running = self._cancel_sent = self._turn_usage_seen = False
        return [
            *self._drain(),
            *withdrawn,
            MessageRefused(message_id, reason),
            TurnEnded("error"),
            *self._next_queued(),
        ]

    def _next_queued(self) -> list[Reaction]:
        if not self._queue:
            return []
        message_id, text = self._queue.popleft()
        write, started = self._start_turn(text, message_id)
        return [write, MessageDelivered(message_id), started]

    def _withdraw(self, reason: str) -> list[Reaction]:
        """Every pending permission answered `cancelled` (as the spec asks of a client
        whose turn is cancelled or over) and withdrawn."""
        reactions: list[Reaction] = []
        for permission_id, (request_id, _) in self._permissions.items():
            reactions += [
                result_line(request_id, _CANCELLED),
                PermissionWithdrawn(permission_id, reason),
            ]
        self._permissions.clear()
        return reactions

    def _start_turn(self, text: str, message_id: str) -> list[Reaction]:
        assert self._session_id is not None
        self._turn_running, self._cancel_sent = True, False
        blocks = [schema.TextContentBlock(type="text", text=text)]
        if message_id == OPENING and self._instructions:
            blocks.insert(0, schema.TextContentBlock(type="text", text=self._instructions))
        prompt = schema.PromptRequest(session_id=self._session_id, prompt=list(blocks))
        self._prompts[self._next_id] = message_id
        started: list[Reaction] = [self._request("session/prompt", prompt), TurnStarted()]
        return [*started, *self._cancel()] if self._cancel_wanted else started

    def _add_usage(self, usage: Usage | None) -> None:
        if usage is not None:
            self._usage = Usage.total([self._usage, usage])

    def _request(self, method: str, params: pydantic.BaseModel) -> Write:
        request_id, self._next_id = self._next_id, self._next_id + 1
        self._requests[request_id] = method
        return write_line({"id": request_id, "method": method, "params": dump(params)})

    def _drain(self) -> list[Reaction]:
        return list(self._events.drain(self._usage))

    def _fail(self, reason: str) -> list[Reaction]:
        self._failed = True
        return [ProtocolFailure(reason)]
