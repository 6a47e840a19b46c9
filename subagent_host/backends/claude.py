"""The `claude` backend: Claude Code (`@anthropic-ai/claude-code`), headless.

    claude -p --output-format stream-json --verbose --permission-mode dontAsk
           --strict-mcp-config [--model M] [--effort LEVEL] [--resume ID]
           [--safe-mode] --tools A,B --allowedTools A,B   (the prompt on stdin, then EOF)

Tools: `--tools` sets which built-in tools exist at all (without it Claude Code
offers two dozen, far beyond this catalog), so the child always gets it: the
requested tools, else the whole catalog, which is what the run reports.
`--strict-mcp-config` (with no `--mcp-config`) keeps MCP servers configured in
user or project settings from adding tools of their own. Permissions:
`--permission-mode dontAsk` never prompts (there is nobody to answer) and denies
whatever is not pre-approved; `--allowedTools` pre-approves exactly the listed
tools, so they run. `default` mode denies a Bash command that is not read-only,
`acceptEdits` still refuses e.g. a network command, `auto` asks the model for a
classification (extra requests), and `bypassPermissions` (like
`--dangerously-skip-permissions`) is refused as root unless `IS_SANDBOX=1`.
Each list is one argv element (comma-joined): a list-taking flag can swallow a
positional prompt, but the prompt goes on stdin. `thinking` is `--effort`.
A lean child gets `--safe-mode`: no CLAUDE.md, skills, plugins, hooks, MCP
servers, custom commands or agents, output styles (managed policy settings
still apply; built-in tools, permissions, auth and model work as usual).
All but the first line above is `session_args`, which an interactive child's launch
shares (backends/interactive/claude_stream.py): there, when someone answers
permission prompts, `--permission-mode default --permission-prompt-tool stdio`
without `--allowedTools` instead.

Claude Code prints one JSON event per line: `system`/`init` (the session id),
`assistant` (text and `tool_use` content), `user` (tool results),
`system`/`api_retry`, and one `result` at the end (`subtype`, `is_error`,
`result` = final text, `usage`, `total_cost_usd`). What the run reports: the
result's text, usage and cost, the session id, and an `activity` event per tool
call (the tool's name only, never its arguments). A `result` with `is_error`
(an unreachable model says `subtype: "success"` and `is_error: true`) is
`failed`; `error_max_turns` is the CLI's own limit (`limit-reached`).

Turns: `maxTurns` is passed as `--max-turns N`: Claude Code makes N model
responses and, instead of sending request N + 1, ends with `error_max_turns`.
The server counts too, as a backstop: a turn begins with the first `assistant`
event of a new top-level message id (one response may come as several events
sharing an id; a subagent's messages, with a `parent_tool_use_id`, are not the
child's own turns).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from subagent_host.backends.base import (
    EFFECTS,
    FILESYSTEM_READ,
    FILESYSTEM_WRITE,
    MAX_TURNS_LIMIT,
    NETWORK,
    AgentCLI,
    ItemSpec,
    Launch,
    ParsedOutcome,
)
from subagent_host.backends.events import ToolCatalog, ToolKind
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.jsonlines import JsonEventParser
from subagent_host.backends.reports import exit_message, short
from subagent_host.values import LEAN
from subagent_host.values.choices import Effect
from subagent_host.values.facts import Usage
from subagent_host.values.plurals import plural

EXECUTABLE: Final = "claude"
# `Bash` runs any command with the user's permissions (Claude Code's own sandbox is
# off unless the user's settings turn it on, which the server cannot see): it can
# write files and reach the network as well as start processes, so it carries
# every effect.
TOOLS: Final[Mapping[str, frozenset[Effect]]] = {
    "Read": frozenset({FILESYSTEM_READ}),
    "Grep": frozenset({FILESYSTEM_READ}),
    "Glob": frozenset({FILESYSTEM_READ}),
    "Bash": frozenset(EFFECTS),
    "Edit": frozenset({FILESYSTEM_READ, FILESYSTEM_WRITE}),
    "Write": frozenset({FILESYSTEM_WRITE}),
    "WebFetch": frozenset({NETWORK}),
    "WebSearch": frozenset({NETWORK}),
}
# What it asks before (`--permission-mode default`, where someone answers), by tool: each
# Write and Edit, and each Bash command it does not deem read-only (a command that
# writes or reaches the network is not; `ls` or `sleep` runs unasked); its reads and web
# tools are not counted as asked.
ASKED: Final[Mapping[str, frozenset[Effect]]] = {
    "Bash": frozenset({FILESYSTEM_WRITE, NETWORK}),
    "Edit": frozenset({FILESYSTEM_READ, FILESYSTEM_WRITE}),
    "Write": frozenset({FILESYSTEM_WRITE}),
}
# `--effort`: how hard the model thinks (sent as `output_config.effort`).
THINKING_LEVELS: Final = ("low", "medium", "high", "xhigh", "max")
PERMISSION_MODE: Final = "dontAsk"
# Where someone answers permission prompts (an interactive child): `default` asks for
# every tool use it does not deem read-only, through the prompt tool.
ASKING_MODE: Final = "default"
LEAN_FLAGS: Final = ("--safe-mode",)
# The server's variables a claude child also gets: where the API is and its key,
# Claude Code's own directory, the switches that keep it from connecting anywhere
# else, and its retry, timeout and model settings.
ENV_ALLOWED: Final = frozenset(
    {
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
        "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "CLAUDE_CONFIG_DIR",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
        "DISABLE_ERROR_REPORTING",
        "DISABLE_NON_ESSENTIAL_MODEL_CALLS",
        "DO_NOT_TRACK",
        "CLAUDE_CODE_MAX_RETRIES",
        "API_TIMEOUT_MS",
        "BASH_DEFAULT_TIMEOUT_MS",
        "BASH_MAX_TIMEOUT_MS",
        "NODE_EXTRA_CA_CERTS",
        "IS_SANDBOX",
    }
)
TOOL_KINDS: Final[ToolCatalog] = {
    "Read": (ToolKind.READ, ("file_path",)),
    "LS": (ToolKind.READ, ("path",)),
    "Grep": (ToolKind.SEARCH, ("pattern",)),
    "Glob": (ToolKind.SEARCH, ("pattern",)),
    "Bash": (ToolKind.EXECUTE, ("command",)),
    "Edit": (ToolKind.EDIT, ("file_path",)),
    "MultiEdit": (ToolKind.EDIT, ("file_path",)),
    "Write": (ToolKind.EDIT, ("file_path",)),
    "NotebookEdit": (ToolKind.EDIT, ("notebook_path",)),
    "WebFetch": (ToolKind.FETCH, ("url",)),
    "WebSearch": (ToolKind.FETCH, ("query",)),
    "TodoWrite": (ToolKind.THINK, ()),
    "Task": (ToolKind.OTHER, ("description",)),
}
ERROR_MESSAGE_CHARS: Final = 1000
MAX_TURNS_SUBTYPE: Final = "error_max_turns"


class ClaudeBackend(AgentCLI):
    id = "claude"
    executable = EXECUTABLE
    tools: Mapping[str, frozenset[Effect]] = TOOLS
    env_allowed: frozenset[str] = ENV_ALLOWED
    thinking_levels: tuple[str, ...] = THINKING_LEVELS
    # Without `tools` the child is still started with `--tools`: the whole catalog.
    default_tools: tuple[str, ...] = tuple(TOOLS)
    asked_tools: Mapping[str, frozenset[Effect]] = ASKED
    # Under `policy` the host answers each asked use from the child's access (rejecting
    # those beyond it, as the receipts' `host-hard` says): nothing else stops its tools.
    policy_kept_tools: Mapping[str, frozenset[Effect]] = ASKED

    def prepare(self, item: ItemSpec) -> Launch:
        argv = [self.executable, "-p", "--output-format", "stream-json", "--verbose"]
        return self.launch(argv + self.session_args(item, ask=False), item)

    def session_args(self, item: ItemSpec, *, ask: bool) -> list[str]:
        """The arguments that say what the child is (model, tools, permissions, session,
        instructions), whatever way it is talked to. `ask`: tools that are not
        read-only are asked for through `--permission-prompt-tool stdio` (someone
        answers on stdin) instead of pre-approved by `--allowedTools`."""
        argv = ["--permission-mode", ASKING_MODE if ask else PERMISSION_MODE]
        if ask:
            argv += ["--permission-prompt-tool", "stdio"]
        argv.append("--strict-mcp-config")
        if item.model is not None:
            # Agent definitions name models `provider/id`; Claude Code takes the id.
            argv += ["--model", item.model.removeprefix("anthropic/")]
        if item.thinking is not None:
            argv += ["--effort", item.thinking]
        if item.resume_session is not None:
            argv += ["--resume", item.resume_session]
        if item.session_resources == LEAN:
            argv += LEAN_FLAGS
        tools = item.tools if item.tools is not None else self.default_tools
        argv += ["--tools", ",".join(tools)]  # "" offers no tool at all
        if tools and not ask:
            argv += ["--allowedTools", ",".join(tools)]
        if item.max_turns is not None:
            argv += ["--max-turns", str(item.max_turns)]
        if item.instructions is not None:
            # One argument with "=": instructions starting with "-" stay a value.
            argv.append(f"--append-system-prompt={item.instructions}")
        return argv

    def parser(self) -> ClaudeParser:
        return ClaudeParser()


class ClaudeParser(JsonEventParser):
    """Turns Claude Code's `stream-json` events into a run's outcome."""

    program = "claude"

    def __init__(self) -> None:
        super().__init__(whole_blocks=True)  # text comes as whole content blocks
        self._result: dict[str, Any] | None = None
        # The text of the last top-level assistant message (its events share an id).
        self._last_message_id: object = None
        self._last_texts: list[str] = []
        # The newest usage of each message (its events repeat it), summed until `result`.
        self._message_usage: dict[object, Usage] = {}
        # The tokens of every `result` so far (an interactive child prints one per turn,
        # each counting its own turn's tokens) and the latest one's cost (a running total).
        self._results_usage: Usage | None = None
        self.session_id: str | None = None

    @property
    def finished(self) -> bool:
        return self._result is not None

    def on_event(self, event: dict[str, Any]) -> None:
        """One event already read from its line (an interactive conversation reads the
        lines itself: they carry its control messages too)."""
        self._on_event(event)

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "system":
            subtype = event.get("subtype")
            if subtype == "init" and isinstance(event.get("session_id"), str):
                self.session_id = event["session_id"]
            elif subtype == "api_retry":
                attempt, most = event.get("attempt"), event.get("max_retries")
                why = short(event.get("error_status") or event.get("error"))
                self._retrying(f"{short(attempt)}/{short(most)}: {why}")
        elif kind == "assistant":
            self._answered()
            self._on_assistant(event)
        elif kind == "user":
            self._on_tool_results(event)
        elif kind == "result":
            self._events.end_response()
            self._result = event
            self._results_usage = _plus(self._results_usage, _usage_of(event))
            self._message_usage.clear()  # the result counted them
            if isinstance(event.get("session_id"), str):
                self.session_id = event["session_id"]

    def _on_assistant(self, event: dict[str, Any]) -> None:
        message = event.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            return
        top_level = event.get("parent_tool_use_id") is None
        if top_level and message.get("id") != self._last_message_id:
            self._events.end_response()
            self._last_message_id = message.get("id")
            self._last_texts = []
            self._turns += 1
        usage = _tokens_of(message.get("usage"))
        if usage is not None:
            self._message_usage[message.get("id")] = usage
        for part in message["content"]:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "tool_use":
                self._pending_activity.append(f"tool {short(part.get('name'))}")
                self._tools_running.add(str(part.get("id")))
                # Blocks come whole: the text before a tool call is all of it.
                self._events.end_response()
                self._events.tool_started(
                    part.get("id"), part.get("name"), part.get("input"), TOOL_KINDS
                )
            elif top_level and part.get("type") == "text" and isinstance(part.get("text"), str):
                self._last_texts.append(part["text"])
                self._events.text(part["text"])

    def _on_tool_results(self, event: dict[str, Any]) -> None:
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and part.get("type") == "tool_result":
                self._tools_running.discard(str(part.get("tool_use_id")))
                is_error = part.get("is_error") is True
                self._events.tool_ended(part.get("tool_use_id"), is_error=is_error)

    @property
    def usage(self) -> Usage | None:
        """What the `result` events sum; before one, the tokens of the messages since the
        last (cost: the latest `result`'s, as Claude Code reports it there only)."""
        usage = self._results_usage
        for message in self._message_usage.values():
            usage = _plus(usage, message)
        return usage

    @property
    def tool_running(self) -> bool:
        """A tool was called and its result has not come back: silence is not a stall."""
        return bool(self._tools_running) and self._result is None

    def _outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        result = self._result
        text = "".join(self._last_texts)
        if result is not None and isinstance(result.get("result"), str):
            text = result["result"]
        answer = ParsedOutcome.answer(text, _usage_of(result), self.session_id)
        if result is not None:
            # Its final event was printed: it decides, however the process ended
            # afterwards (one that lingers is ended by the server).
            subtype = result.get("subtype")
            if subtype == MAX_TURNS_SUBTYPE:
                turns = result.get("num_turns")
                counted = plural(turns, "turn") if type(turns) is int else f"{short(turns)} turns"
                message = f"claude stopped at its turn limit ({counted})"
                return answer.failed(None, message, reached_limit=MAX_TURNS_LIMIT)
            if result.get("is_error") is True or subtype != "success":
                message = f"claude: {_error_of(result)}"
                return self._failed(answer, "agent-error", message, exit_status)
            return answer
        message = exit_message("claude", exit_status, "printing its result")
        return self._failed(answer, "exit-status", self._with_stderr_reason(message), exit_status)


def _usage_of(result: dict[str, Any] | None) -> Usage | None:
    """The run's tokens and cost, as its `result` event sums them."""
    if result is None:
        return None
    usage = result.get("usage")
    cost: float | None = None
    total = result.get("total_cost_usd")
    if isinstance(total, int | float) and not isinstance(total, bool):
        cost = float(total)
    if not isinstance(usage, dict) and cost is None:
        return None
    tokens = _tokens_of(usage if isinstance(usage, dict) else {})
    assert tokens is not None
    return attrs.evolve(tokens, cost_usd=round(cost, 6) if cost is not None else None)


def _plus(total: Usage | None, more: Usage | None) -> Usage | None:
    """`total` with the tokens of `more` added; the cost is the newest one said (Claude
    Code's `total_cost_usd` is the session's running total)."""
    if total is None or more is None:
        return more if total is None else total
    return Usage(
        input_tokens=total.input_tokens + more.input_tokens,
        output_tokens=total.output_tokens + more.output_tokens,
        cache_read_tokens=total.cache_read_tokens + more.cache_read_tokens,
        cache_write_tokens=total.cache_write_tokens + more.cache_write_tokens,
        cost_usd=more.cost_usd if more.cost_usd is not None else total.cost_usd,
    )


def _tokens_of(usage: object) -> Usage | None:
    """An API `usage` object's tokens (a missing count is 0); None when it is not one."""
    if not isinstance(usage, dict):
        return None

    def tokens(name: str) -> int:
        value = usage.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return Usage(
        input_tokens=tokens("input_tokens"),
        output_tokens=tokens("output_tokens"),
        cache_read_tokens=tokens("cache_read_input_tokens"),
        cache_write_tokens=tokens("cache_creation_input_tokens"),
    )


def _error_of(result: dict[str, Any]) -> str:
    """What a failed `result` says went wrong."""
    if isinstance(result.get("result"), str) and result["result"]:
        return short(result["result"], ERROR_MESSAGE_CHARS)
    errors = result.get("errors")
    if isinstance(errors, list):
        texts = [e for e in errors if isinstance(e, str) and e]
        if texts:
            return short("; ".join(texts), ERROR_MESSAGE_CHARS)
    return f"{short(result.get('subtype'))} (is_error)"
