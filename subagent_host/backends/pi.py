"""The `pi` backend: the pi coding agent (`@mariozechner/pi-coding-agent`), headless.

    pi --mode json --session-dir DIR [--session FILE] [--provider P --model M]
       [--thinking LEVEL] [--tools a,b]          (the prompt on stdin, then EOF)
       [--no-extensions --no-skills --no-prompt-templates --no-context-files]   (lean)

pi prints one JSON event per line (`session`, `agent_start`, `message_end`,
`tool_execution_start`, `agent_end`, `auto_retry_*`, ...). What the run
reports: the last assistant message's text, usage summed over every assistant
message, the session id (from the `session` event), and an `activity` event per
tool call (the tool's name only, never its arguments). pi exits 0 even when the
model could not be reached: its last assistant message then has
`stopReason: "error"`, which is reported as `failed`.

Turns: pi prints `turn_start` before each request to the model. A turn begins
there, numbered one more than the responses completed so far (assistant
`message_end`s without an error), so a request pi retries after an error
(`auto_retry_*`, which starts with a new `turn_start`) is the same turn again.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from subagent_host.backends.base import (
    EFFECTS,
    FILESYSTEM_READ,
    FILESYSTEM_WRITE,
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

EXECUTABLE: Final = "pi"
# `bash` runs any command with the user's permissions (pi does not sandbox it): it
# can write files and reach the network as well as start processes, so it carries
# every effect. `grep` and `find` run ripgrep and fd; when those are not installed
# and PI_OFFLINE is not set, pi first downloads them from GitHub into its own
# directory: a network request, a file written and a program started that the
# server cannot rule out beforehand, so they carry every effect too.
TOOLS: Final[Mapping[str, frozenset[Effect]]] = {
    "read": frozenset({FILESYSTEM_READ}),
    "grep": frozenset(EFFECTS),
    "find": frozenset(EFFECTS),
    "ls": frozenset({FILESYSTEM_READ}),
    "bash": frozenset(EFFECTS),
    "edit": frozenset({FILESYSTEM_READ, FILESYSTEM_WRITE}),
    "write": frozenset({FILESYSTEM_WRITE}),
}
# What pi offers when `--tools` is not given.
DEFAULT_TOOLS: Final = ("read", "bash", "edit", "write")
THINKING_LEVELS: Final = ("off", "minimal", "low", "medium", "high", "xhigh")
# A lean child loads none of the user's or the project's extensions, skills, prompt
# templates or context files (AGENTS.md, CLAUDE.md): only what the request gives it.
LEAN_FLAGS: Final = (
    "--no-extensions",
    "--no-skills",
    "--no-prompt-templates",
    "--no-context-files",
)
# The server's variables a pi child also gets: its own settings, and the API keys
# of the providers it can talk to.
ENV_ALLOWED: Final = frozenset(
    {
        "PI_CODING_AGENT_DIR",
        "PI_OFFLINE",
        "PI_SKIP_VERSION_CHECK",
        "PI_TELEMETRY",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "OPENROUTER_API_KEY",
        "GROQ_API_KEY",
        "MISTRAL_API_KEY",
        "XAI_API_KEY",
    }
)
FAILED_STOP_REASONS: Final = ("error", "aborted")
TOOL_KINDS: Final[ToolCatalog] = {
    "read": (ToolKind.READ, ("path",)),
    "ls": (ToolKind.READ, ("path",)),
    "grep": (ToolKind.SEARCH, ("pattern",)),
    "find": (ToolKind.SEARCH, ("pattern",)),
    "bash": (ToolKind.EXECUTE, ("command",)),
    "edit": (ToolKind.EDIT, ("path",)),
    "write": (ToolKind.EDIT, ("path",)),
}


class PiBackend(AgentCLI):
    id = "pi"
    executable = EXECUTABLE
    tools: Mapping[str, frozenset[Effect]] = TOOLS
    env_allowed: frozenset[str] = ENV_ALLOWED
    thinking_levels: tuple[str, ...] = THINKING_LEVELS
    default_tools: tuple[str, ...] = DEFAULT_TOOLS

    def __init__(self, session_dir: Path, executable: str | None = None) -> None:
        super().__init__(executable)
        self.session_dir = session_dir

    def prepare(self, item: ItemSpec) -> Launch:
        return self.launch(self.argv(item, "json"), item)

    def argv(self, item: ItemSpec, mode: str) -> list[str]:
        """pi's command line for `item` in one of its modes: `json` for a one-shot run,
        `rpc` for an interactive one (backends/interactive/pi_rpc.py)."""
        argv = [self.executable, "--mode", mode, "--session-dir", str(self.session_dir)]
        if item.resume_session is not None:
            argv += ["--session", item.resume_session]
        if item.model is not None:
            provider, slash, model = item.model.partition("/")
            argv += ["--provider", provider, "--model", model] if slash else ["--model", provider]
        if item.thinking is not None:
            argv += ["--thinking", item.thinking]
        if item.tools is not None:
            argv += ["--tools", ",".join(item.tools)]
        if item.session_resources == LEAN:
            argv += LEAN_FLAGS
        if item.instructions is not None:
            # pi takes the next argument verbatim, even one that starts with "-"; but a
            # value naming an existing file is replaced by that file's contents. With a
            # final line break, instructions can never be taken for a path.
            text = item.instructions
            argv += ["--append-system-prompt", text if text.endswith("\n") else text + "\n"]
        return argv

    def parser(self) -> PiParser:
        return PiParser()


class PiParser(JsonEventParser):
    """Turns pi's `--mode json` events into a run's outcome."""

    program = "pi"

    def __init__(self) -> None:
        super().__init__()
        self._last_assistant: dict[str, Any] | None = None
        self._usage = [0, 0, 0, 0]  # input, output, cache read, cache write
        self._cost = 0.0
        self._saw_cost = False
        self._retry_error: str | None = None
        self._finished = False
        self._responses = 0  # assistant messages that completed without an error
        self.session_id: str | None = None

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def tool_running(self) -> bool:
        """A tool started and has not ended: silence now is not a stall."""
        return bool(self._tools_running)

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "session" and isinstance(event.get("id"), str):
            self.session_id = event["id"]
        elif kind == "agent_start":
            self._finished = False  # a retry starts the agent again
        elif kind == "turn_start":
            self._turns = max(self._turns, self._responses + 1)
        elif kind == "agent_end":
            self._finished = True
        elif kind == "message_update":
            update = event.get("assistantMessageEvent")
            if isinstance(update, dict):
                self._answered()  # the model is streaming its response
            if isinstance(update, dict) and update.get("type") == "text_delta":
                delta = update.get("delta")
                self._events.text(delta if isinstance(delta, str) else "")
        elif kind == "tool_execution_start":
            self._pending_activity.append(f"tool {short(event.get('toolName'))}")
            self._tools_running.add(str(event.get("toolCallId")))
            self._events.tool_started(
                event.get("toolCallId"), event.get("toolName"), event.get("args"), TOOL_KINDS
            )
        elif kind == "tool_execution_end":
            self._tools_running.discard(str(event.get("toolCallId")))
            self._events.tool_ended(event.get("toolCallId"), is_error=event.get("isError") is True)
        elif kind == "auto_retry_start":
            attempt, most = event.get("attempt"), event.get("maxAttempts")
            self._finished = False
            why = short(event.get("errorMessage"))
            self._retrying(f"{short(attempt)}/{short(most)}: {why}")
        elif kind == "auto_retry_end" and event.get("success") is False:
            self._retry_error = str(event.get("finalError") or "retries exhausted")
            self._finished = True
        elif kind == "message_end":
            message = event.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                self._events.end_response()
                self._last_assistant = message
                self._add_usage(message.get("usage"))
                if message.get("stopReason") not in FAILED_STOP_REASONS:
                    self._responses += 1
                    self._answered()

    def _add_usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        for i, name in enumerate(("input", "output", "cacheRead", "cacheWrite")):
            value = usage.get(name)
            if isinstance(value, int):
                self._usage[i] += value
        cost = usage.get("cost")
        if isinstance(cost, dict) and isinstance(cost.get("total"), int | float):
            self._cost += float(cost["total"])
            self._saw_cost = True

    def _outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        answer = ParsedOutcome.answer(
            _text_of(self._last_assistant), self._usage_total(), self.session_id
        )
        stop_reason = (self._last_assistant or {}).get("stopReason")
        if self._retry_error is not None or stop_reason in FAILED_STOP_REASONS:
            message = (self._last_assistant or {}).get("errorMessage") or self._retry_error
            return self._failed(answer, "agent-error", f"pi: {message or stop_reason}", exit_status)
        if self._finished and self._last_assistant is not None:
            # Its final event was printed: that answer stands, however the process
            # ended afterwards (one that lingers is ended by the server).
            return answer
        message = exit_message("pi", exit_status, "finishing its answer")
        return self._failed(answer, "exit-status", self._with_stderr_reason(message), exit_status)

    @property
    def usage(self) -> Usage | None:
        return self._usage_total()

    def _usage_total(self) -> Usage | None:
        if not any(self._usage) and not self._saw_cost:
            return None
        return Usage(
            input_tokens=self._usage[0],
            output_tokens=self._usage[1],
            cache_read_tokens=self._usage[2],
            cache_write_tokens=self._usage[3],
            cost_usd=round(self._cost, 6) if self._saw_cost else None,
        )


def _text_of(message: dict[str, Any] | None) -> str:
    """The text parts of an assistant message, joined."""
    if message is None or not isinstance(message.get("content"), list):
        return ""
    parts = [
        part.get("text", "")
        for part in message["content"]
        if isinstance(part, dict) and part.get("type") == "text"
    ]
    return "".join(p for p in parts if isinstance(p, str))
