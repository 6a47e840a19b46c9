"""The `codex` backend: OpenAI's Codex CLI (`@openai/codex`), headless.

    codex exec --json --skip-git-repo-check -c approval_policy="never"
          --sandbox MODE [-c sandbox_workspace_write.network_access=BOOL]
          [-c web_search="disabled"] [-m MODEL] [-c model_reasoning_effort="LEVEL"]
          [-c project_doc_max_bytes=0 -c skills.include_instructions=false
           --disable hooks --disable plugins --disable apps]                  (lean)
          [resume -- THREAD_ID] -                   (the prompt on stdin, then EOF)

codex prints one JSON event per line: `thread.started` (`thread_id`, the session a
resume continues), `turn.started`, `item.started` / `item.updated` /
`item.completed` (items `command_execution`, `file_change`, `mcp_tool_call`,
`web_search`, `agent_message`, `reasoning`, `error`, ...), `turn.completed`
(`usage`), `turn.failed` (`error.message`) and top-level `error`. What the run
reports: the last `agent_message`'s text; usage summed over `turn.completed`
events (`input_tokens` counts cached input too: the run's `inputTokens` is the
uncached part and `cacheReadTokens` the `cached_input_tokens`, as for the other
backends; codex reports no cost); the thread id; an `activity` event per tool
the agent runs (`tool shell`, `tool apply_patch`, ...: never the command or its
output).

Outcome: `turn.completed` is a completed run, however codex exits afterwards;
`turn.failed` is `failed` with `agent-error` and codex's message. A top-level
`error` alone is not the end: codex prints `Reconnecting... n/5 (...)` there
while it retries (an activity event says so, once per reason), then goes on;
until the model answers, that is not progress (`retrying`). Ending without
either turn event is `failed`: `agent-error` when codex said why in an `error`
event other than a retry notice, else `exit-status` (with codex's last retry
notice or `Error: ...` line); the stderr tail goes in the error data (codex
writes harmless warnings there, so stderr alone never fails a run). With the
model unreachable codex reconnects for ever: its `stallTimeoutMs` ends it,
`agent-error` with codex's reason (runs/child_runner.py). `error` *items*
(e.g. "Model metadata for `X` not found") are warnings: the turn goes on.
Resuming an id codex does not know exits 1 ("no rollout found"); an unknown
*name* would silently start a new thread, which is why only the thread id
(a UUID) from `thread.started` is ever passed to `resume`.

Turns: codex prints one `turn.started` per `exec`, however many model
responses it makes, and no event when it sends a request. So a turn (one model
response) is counted from the items: the first item of the exec begins turn 1,
and after that the first item that follows a completed tool item, with no tool
item still running, begins the next (codex sends the tools' results back and
the answer is a new response). `error` items are warnings, not responses. A
response whose several tool calls codex runs one after another is counted as
more than one turn: the count may run ahead of the responses, never behind.

Tools, access and codex's sandbox. codex always has its shell (`exec_command`,
`write_stdin`) and file edits (`apply_patch`); what they may do is set by its
sandbox (bubblewrap + seccomp on Linux), which also confines every command the
model runs. So the catalog is the sandbox tiers, each with the effects that
sandbox lets through, and a child runs under the widest tier it gets:

    tool (tier)               sandbox                                   effects
    read-only                 --sandbox read-only                       process, filesystem-read
    workspace-write           --sandbox workspace-write, no network     + filesystem-write
    workspace-write-network   --sandbox workspace-write, with network   + network

Without `tools` or `access` a child gets every tier, so `workspace-write-network`:
it edits its working directory (and the temporary directories) and may use the
network, like codex's own `--full-auto` plus network; nothing outside the
workspace is writable. A request's `access` removes the tiers beyond it:
`filesystem: "read"` leaves `read-only`; `network: false` leaves
`workspace-write` (network off, and codex's web search tool disabled). codex
cannot run without reading files and running processes, so `filesystem: "none"`
or `process: false` leaves no tier: the request fails with `no-tools-left`
rather than run a codex that does more than asked. The sandbox is also capped
by the item's `filesystem_access` / `network_access` (read or none: read-only;
no network: no network tier). codex's own `danger-full-access` (no sandbox) is
not offered. `approval_policy="never"`: nothing waits for a human, and a command
asking to leave the sandbox (`require_escalated`) is refused by codex itself.
What the sandbox does not cover: MCP servers, hooks and `notify` programs the
user's `$CODEX_HOME/config.toml` configures run with the user's permissions
(codex cannot turn them off wholesale from the command line), so a codex home
used with narrowed access should configure none.

Environment: besides the common allowlist a codex child gets the server's
`CODEX_HOME` (its config, credentials and sessions, which a resume needs),
`CODEX_API_KEY`, `OPENAI_API_KEY` and `OPENAI_BASE_URL`. The variable a custom
provider's `env_key` names is not passed unless the spawn's `env` carries it
(or the backend is built with it in `extra_env_allowed`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from subagent_host.backends.base import (
    FILESYSTEM_READ,
    FILESYSTEM_WRITE,
    NETWORK,
    PROCESS,
    AgentCLI,
    ItemSpec,
    Launch,
    ParsedOutcome,
)
from subagent_host.backends.events import NormalizedEvents, ToolKind, summary_of
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.jsonlines import JsonEventParser
from subagent_host.backends.reports import ERROR_LABEL, STDERR_TAIL_BYTES, exit_message, short
from subagent_host.values import LEAN
from subagent_host.values.choices import Effect
from subagent_host.values.facts import Usage

EXECUTABLE: Final = "codex"
READ_ONLY: Final = "read-only"
WORKSPACE_WRITE: Final = "workspace-write"
WORKSPACE_NETWORK: Final = "workspace-write-network"
TIERS: Final = (READ_ONLY, WORKSPACE_WRITE, WORKSPACE_NETWORK)
"""The sandbox tiers, narrowest first."""
TOOLS: Final[Mapping[str, frozenset[Effect]]] = {
    READ_ONLY: frozenset({PROCESS, FILESYSTEM_READ}),
    WORKSPACE_WRITE: frozenset({PROCESS, FILESYSTEM_READ, FILESYSTEM_WRITE}),
    WORKSPACE_NETWORK: frozenset({PROCESS, FILESYSTEM_READ, FILESYSTEM_WRITE, NETWORK}),
}
# What it asks before (`approvalPolicy: "untrusted"`, where someone answers), by tier:
# each patch and each command it does not know to be harmless; its web search (the
# networked tier's) runs unasked.
ASKED: Final[Mapping[str, frozenset[Effect]]] = {
    WORKSPACE_WRITE: frozenset({FILESYSTEM_WRITE}),
    WORKSPACE_NETWORK: frozenset({FILESYSTEM_WRITE}),
}
NO_WEB_SEARCH: Final = ("-c", 'web_search="disabled"')
SANDBOX_MODES: Final[Mapping[str, str]] = {
    READ_ONLY: "read-only",
    WORKSPACE_WRITE: "workspace-write",
    WORKSPACE_NETWORK: "workspace-write",
}
"""codex's sandbox mode for each tier (`--sandbox`, `sandbox_mode`, a thread's `sandbox`)."""
SANDBOX_CONFIG: Final[Mapping[str, tuple[str, ...]]] = {
    READ_ONLY: NO_WEB_SEARCH,
    WORKSPACE_WRITE: ("-c", "sandbox_workspace_write.network_access=false", *NO_WEB_SEARCH),
    WORKSPACE_NETWORK: ("-c", "sandbox_workspace_write.network_access=true"),
}
"""What each tier sets besides the mode: the sandbox's network, codex's web search."""
SANDBOX_FLAGS: Final[Mapping[str, tuple[str, ...]]] = {
    tier: ("--sandbox", SANDBOX_MODES[tier], *SANDBOX_CONFIG[tier]) for tier in TIERS
}
# A lean child reads no AGENTS.md (project docs), lists no skills, and runs no hooks,
# plugins or apps (connectors). MCP servers of `config.toml` stay: a `-c` override
# merges into that table and cannot empty it.
LEAN_FLAGS: Final = (
    "-c",
    "project_doc_max_bytes=0",
    "-c",
    "skills.include_instructions=false",
    "--disable",
    "hooks",
    "--disable",
    "plugins",
    "--disable",
    "apps",
)
# codex's `model_reasoning_effort` values (the model decides which it accepts).
THINKING_LEVELS: Final = ("none", "minimal", "low", "medium", "high", "xhigh")
ENV_ALLOWED: Final = frozenset({"CODEX_HOME", "CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"})
MESSAGE_LIMIT: Final = 2000
# Item types that are a tool the agent ran, and the name an activity event gives them.
TOOL_ITEMS: Final[Mapping[str, str]] = {
    "command_execution": "shell",
    "file_change": "apply_patch",
    "web_search": "web_search",
    "todo_list": "update_plan",
    "collab_tool_call": "collab",
}
RECONNECTING: Final = "Reconnecting"
# What follows `Reconnecting...`: a count or a state, then codex's reason in parentheses.
RETRY_NOTICE: Final = re.compile(r"(.*?)\s*\((.*)\)", re.DOTALL)
RETRY_COUNT: Final = re.compile(r"(\d+)/(\d+)\b")
STDERR_ERROR_PREFIX: Final = "error"


class CodexBackend(AgentCLI):
    id = "codex"
    executable = EXECUTABLE
    tools: Mapping[str, frozenset[Effect]] = TOOLS
    # Its shell exists whatever `tools` says: `tools: []` would claim less than it can do.
    tools_required = True
    thinking_levels: tuple[str, ...] = THINKING_LEVELS
    asked_tools: Mapping[str, frozenset[Effect]] = ASKED
    # None is kept under `policy` beyond access: its "tools" are sandbox tiers, and a
    # narrower tier is the operating system's refusal, harder than any answer, so
    # narrowing still picks it (`policy_kept_tools` stays empty).

    def __init__(
        self, executable: str | None = None, extra_env_allowed: Iterable[str] = ()
    ) -> None:
        super().__init__(executable)
        self.env_allowed = ENV_ALLOWED | frozenset(extra_env_allowed)

    def prepare(self, item: ItemSpec) -> Launch:
        argv = [self.executable, "exec", "--json", "--skip-git-repo-check"]
        argv += ["-c", 'approval_policy="never"', *SANDBOX_FLAGS[sandbox_tier(item)]]
        if (model := model_id(item)) is not None:
            argv += ["-m", model]
        argv += session_options(item)
        if item.resume_session is not None:
            # After `--`: an id can never be taken for an option.
            argv += ["resume", "--", item.resume_session]
        argv.append("-")  # the prompt is read from stdin
        return self.launch(argv, item)

    def parser(self) -> CodexParser:
        return CodexParser()


def model_id(item: ItemSpec) -> str | None:
    """The item's model as codex names it (agent definitions say `provider/id`)."""
    return None if item.model is None else item.model.removeprefix("openai/")


def session_options(item: ItemSpec) -> list[str]:
    """The options every codex launch of the item takes (`exec` and `app-server` alike):
    its thinking effort, its instructions, and a lean session's switches."""
    options: list[str] = []
    if item.thinking is not None:
        options += ["-c", f'model_reasoning_effort="{item.thinking}"']
    if item.instructions is not None:
        options += ["-c", f"developer_instructions={toml_string(item.instructions)}"]
    if item.session_resources == LEAN:
        options += LEAN_FLAGS
    return options


def toml_string(text: str) -> str:
    """`text` as a TOML basic string, for a `-c key=value` override.

    JSON's escapes are TOML's, except that JSON writes a character above U+FFFF
    as two surrogate escapes, which TOML refuses (codex would then take the
    whole value as raw text). So non-ASCII stays as it is; DEL, which TOML
    does not allow raw, is escaped; a lone surrogate cannot be sent at all.
    """
    clean = text.encode("utf-8", "replace").decode("utf-8")
    return json.dumps(clean, ensure_ascii=False).replace("\x7f", "\\u007f")


def sandbox_tier(item: ItemSpec) -> str:
    """The widest tier the item got, capped by its access (the narrowest when none)."""
    given = TIERS if item.tools is None else tuple(t for t in TIERS if t in item.tools)
    tier = given[-1] if given else READ_ONLY
    if item.filesystem_access != "write":
        return READ_ONLY  # codex cannot stop reading: "none" is refused before launch
    if not item.network_access and tier == WORKSPACE_NETWORK:
        return WORKSPACE_WRITE
    return tier


class CodexParser(JsonEventParser):
    """Turns `codex exec --json` events into a run's outcome."""

    program = "codex"

    def __init__(self) -> None:
        super().__init__()
        self._announced: set[str] = set()  # items whose activity was reported
        self._final_text: str | None = None
        self._usage = [0, 0, 0, 0]  # input (all of it), output, cached input, cache write
        self._saw_usage = False
        self._turn_failed: str | None = None
        self._fatal_error: str | None = None  # an `error` event that is not a retry notice
        self._retry_notice: str | None = None
        self._completed = False
        self._finished = False
        self._awaiting_response = True  # the next item begins a model response
        self._seen_items: set[str] = set()
        self.thread_id: str | None = None

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def session_id(self) -> str | None:
        return self.thread_id

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self.thread_id = event["thread_id"]
        elif kind == "turn.started":
            self._finished = self._completed = False
            self._turn_failed = None
            self._awaiting_response = True
        elif kind in ("item.started", "item.updated", "item.completed"):
            item = event.get("item")
            if isinstance(item, dict):
                self._on_item(item, completed=kind == "item.completed")
        elif kind == "turn.completed":
            self._answered()
            self._add_usage(event.get("usage"))
            self._completed = self._finished = True
        elif kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            self._turn_failed = _message(message) or self._fatal_error or "the turn failed"
            self._finished = True
        elif kind == "error":
            message = _message(event.get("message"))
            if message is None:
                return
            if message.startswith(RECONNECTING):  # codex retries; the turn goes on
                self._retry_notice = message
                reason = retry_reason(message)
                self._retrying(reason, spent=retries_spent(reason))
            else:
                self._fatal_error = message

    def _on_item(self, item: dict[str, Any], *, completed: bool) -> None:
        kind = item.get("type")
        if kind != "error":  # an `error` item is a warning, not the model's answer
            self._answered()
        self._count_turn(item)
        if kind == "agent_message":
            if completed and isinstance(item.get("text"), str):
                self._final_text = item["text"]
                # An agent message comes whole, once: all of the response's text.
                self._events.text(item["text"])
                self._events.end_response()
            return
        name = TOOL_ITEMS.get(kind) if isinstance(kind, str) else None
        if kind == "mcp_tool_call":
            name = f"mcp {short(item.get('server'))}.{short(item.get('tool'))}"
        if name is None:
            return
        tell_tool(self._events, item, name, completed=completed)
        item_id = item.get("id")
        if completed and not (self._tools_running - {item_id}):
            # The tools' results go back to the model: what comes next is a new response.
            self._awaiting_response = True
        if isinstance(item_id, str):
            if completed:
                self._tools_running.discard(item_id)
            else:
                self._tools_running.add(item_id)
            if item_id in self._announced:
                return
            self._announced.add(item_id)
        elif not completed:
            return  # without an id it is told once, when it completes
        self._pending_activity.append(f"tool {name}")

    def _count_turn(self, item: dict[str, Any]) -> None:
        """A new item (not a warning) after the tools' results begins a model response."""
        item_id = item.get("id")
        is_new = not isinstance(item_id, str) or item_id not in self._seen_items
        if isinstance(item_id, str):
            self._seen_items.add(item_id)
        if is_new and self._awaiting_response and item.get("type") != "error":
            self._turns += 1
            self._awaiting_response = False

    @property
    def tool_running(self) -> bool:
        """A tool item started and has not completed: codex is silent meanwhile."""
        return bool(self._tools_running) and not self._finished

    def _add_usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        names = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_input_tokens")
        for i, name in enumerate(names):
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                self._usage[i] += value
                self._saw_usage = True

    def _outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        answer = ParsedOutcome.answer(self._final_text or "", self._usage_total(), self.thread_id)
        if self._turn_failed is not None:
            message = f"codex: {self._turn_failed}"
            return self._failed(answer, "agent-error", message, exit_status)
        if self._completed:
            # Its final event was printed: that answer stands, however the process
            # ended afterwards (one that lingers is ended by the server).
            return answer
        message = exit_message("codex", exit_status, "finishing its turn")
        if self._fatal_error is not None:
            message = f"codex: {self._fatal_error} ({message})"
            return self._failed(answer, "agent-error", message, exit_status)
        said = self._retry_notice or self._stderr_error()
        message = f"{message}: {said}" if said else message
        return self._failed(answer, "exit-status", message, exit_status)

    @property
    def usage(self) -> Usage | None:
        return self._usage_total()

    def _usage_total(self) -> Usage | None:
        if not self._saw_usage:
            return None
        return usage_of(*self._usage)

    def _stderr_error(self) -> str | None:
        """codex's own last `Error: ...` line on stderr, if it printed one, without the label."""
        lines = self._stderr.text(STDERR_TAIL_BYTES).splitlines()
        said = [line for line in lines if line.lower().startswith(STDERR_ERROR_PREFIX)]
        return _message(ERROR_LABEL.sub("", said[-1].strip(), count=1)) if said else None


def retry_reason(notice: str) -> str:
    """codex's retry notice, short: `Reconnecting... 2/5 (stream disconnected: failed to
    lookup address information)` is `2/5: stream disconnected: failed to lookup address
    information`; `Reconnecting... waiting for network (Connection failed: ...)` is
    `waiting for network: Connection failed: ...`."""
    rest = notice.removeprefix(RECONNECTING).lstrip(".").strip()
    match = RETRY_NOTICE.fullmatch(rest)
    if match is None:
        return rest or notice
    said, why = match.group(1).strip(), match.group(2).strip()
    return f"{said}: {why}" if said else why


def retries_spent(reason: str) -> bool:
    """Whether a retry reason counts its last attempt (`5/5: ...`)."""
    match = RETRY_COUNT.match(reason)
    return match is not None and int(match.group(1)) >= int(match.group(2)) > 0


def usage_of(total_input: int, output: int, cached: int, cache_write: int) -> Usage:
    """codex's token counts as a child's usage: its input counts the cached input too,
    the usage's input is the uncached part; codex reports no cost."""
    return Usage(
        input_tokens=max(total_input - cached, 0),
        output_tokens=output,
        cache_read_tokens=cached,
        cache_write_tokens=cache_write,
        cost_usd=None,
    )


def tell_tool(
    events: NormalizedEvents, item: Mapping[str, Any], name: str, *, completed: bool
) -> None:
    """A tool item's normalized events: a start once, an end when it completes (an item
    that only ever completes starts and ends at once). `item` in `exec --json`'s shape."""
    item_id = item.get("id")
    if not events.is_tool_running(item_id):
        kind, summary = tool_kind(item)
        events.tool_began(item_id, name.removeprefix("mcp "), kind, summary)
    if completed:
        events.tool_ended(item_id, is_error=tool_failed(item))


def tool_kind(item: Mapping[str, Any]) -> tuple[ToolKind, str | None]:
    """A tool item's ACP kind and the summary of what it does."""
    kind = item.get("type")
    if kind == "command_execution":
        return ToolKind.EXECUTE, summary_of(item.get("command"))
    if kind == "file_change":
        changes = item.get("changes")
        paths = [
            change["path"]
            for change in (changes if isinstance(changes, list) else ())
            if isinstance(change, dict) and isinstance(change.get("path"), str)
        ]
        return ToolKind.EDIT, summary_of(", ".join(paths))
    if kind == "web_search":
        return ToolKind.FETCH, summary_of(item.get("query"))
    if kind == "todo_list":
        return ToolKind.THINK, None
    return ToolKind.OTHER, None


def tool_failed(item: Mapping[str, Any]) -> bool:
    """Whether a completed tool item failed: its status (a declined one did not run), or
    a command's exit code."""
    exit_code = item.get("exit_code")
    nonzero = isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0
    failed = item.get("status") in ("failed", "declined")
    return failed or nonzero or item.get("error") not in (None, "")


def _message(value: object) -> str | None:
    """An error message fit for a report: text, bounded."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:MESSAGE_LIMIT]
