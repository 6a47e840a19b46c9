"""Decide, statelessly from one request body, what the mock LLM answers.

The server (`tests/mock_llm/server.py`) parses a request, calls `read_conversation` to
normalise it across the three wire APIs, then `decide_reply` to pick a scenario. The
wire encoders (`tests/mock_llm/wire.py`) turn the resulting `Reply` into bytes.

Rules, in order:
0. the latest user text holds `LOOP-TOOL` -> one shell tool call running the configured
   default command, every time, tool result or not (`Scenario.LOOP_TOOL`): a model that
   never stops calling tools, for turn limits; `DELEGATE-MCP` -> a call of an MCP
   `spawn` tool (a tool named `spawn` or `..._spawn`, as Claude Code names
   `mcp__<server>__spawn`) with `DELEGATIONS[n]`'s arguments, n the tool results so
   far (`Scenario.DELEGATE`): a `command` child, then a pi agent; then final text;
1. the last input item is a tool result -> final text (`Scenario.AFTER_TOOL`), except
   when it is codex reporting a command still running ("Process running with session
   ID N"): then a `write_stdin` poll of that session (`Scenario.POLL_TOOL`);
2. the latest user text holds `STALL` -> start streaming, then hang until close;
3. `SLEEP-TOOL` -> one shell tool call running the configured sleep command;
4. `ANSWER-NOW` -> final text at once;
5. `NARRATE-TOOL` -> text (`NARRATION_TEXT`) and one shell tool call running the
   configured default command, in one response (a turn that says what it does first);
6. otherwise one shell tool call running the configured default command.
A final text ends with each word following `REPEAT:` in the latest user text; with
`REPORT-TOOL` there too, a final text after a tool result ends with ` tool-said: ` and
the first line of that result (what a model tells of a tool refused or failed).
With `ESCALATE` in the latest user text, a shell tool call whose schema has
`sandbox_permissions` (codex's `exec_command`) asks to run outside the sandbox
(`require_escalated`, with a `justification`): what makes codex ask for approval.
A tool call needs a shell-like tool in the request's `tools`; without one the
answer is final text (`Scenario.NO_SHELL_TOOL`).
"""

from __future__ import annotations

import enum
import itertools
import json
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeAlias

JSONValue: TypeAlias = "dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None"
JSONObject: TypeAlias = "dict[str, JSONValue]"

FINAL_TEXT_PREFIX = "MOCK-FINAL:"
STALL_TEXT = "MOCK-STALL: thinking"
KEYWORD_ANSWER_NOW = "ANSWER-NOW"
KEYWORD_SLEEP_TOOL = "SLEEP-TOOL"
KEYWORD_STALL = "STALL"
KEYWORD_LOOP_TOOL = "LOOP-TOOL"
KEYWORD_NARRATE_TOOL = "NARRATE-TOOL"
KEYWORD_DELEGATE_MCP = "DELEGATE-MCP"
# `REPEAT:<word>` in the latest user text: a final text ends with the word (what a
# model says back, e.g. a secret or a long base64 run for redaction).
KEYWORD_REPEAT = "REPEAT:"
KEYWORD_REPORT_TOOL = "REPORT-TOOL"
KEYWORD_ESCALATE = "ESCALATE"
ESCALATION_JUSTIFICATION = "the mock asks to run this outside the sandbox"
TOOL_SAID = " tool-said: "
DELEGATED_COMMAND_TEXT = "delegated-command-ran"
DELEGATED_AGENT_PROMPT = f"{KEYWORD_ANSWER_NOW} you are the delegated pi agent"
# What a model delegating through `subagent-host mcp` asks for, one call per turn: a
# command child, then a pi agent on this mock (the test's server environment points
# pi here); each waits for its end within the call.
DELEGATIONS: tuple[JSONObject, ...] = (
    {"command": ["echo", DELEGATED_COMMAND_TEXT], "waitSeconds": 30},
    {
        "prompt": DELEGATED_AGENT_PROMPT,
        "backend": "pi",
        "model": "mock/mock-model",
        "waitSeconds": 50,
    },
)
NARRATION_TEXT = "MOCK-NARRATION: let me run a command first."
DEFAULT_TOOL_COMMAND = "echo mock-tool-ran"
DEFAULT_SLEEP_COMMAND = "sleep 300"

# Token counts are made up but deterministic: a test can predict the run's usage.
BASE_INPUT_TOKENS = 100
OUTPUT_TOKENS = 20

# Long enough for `sleep 300`: the CLIs' own default tool timeouts (Claude Code 2 min,
# codex 10 s) would otherwise end the "long-running tool" scenario early.
LONG_TOOL_TIMEOUT_MS = 600_000
LONG_TOOL_TIMEOUT_S = 600
# codex's exec_command returns after yield_time_ms (at most 30 s) with the command still
# running; the mock then polls it with write_stdin (see `_poll_running_session`).
LONG_YIELD_TIME_MS = 30_000
POLL_YIELD_TIME_MS = 300_000

# Exact names (lower-cased) that are a shell tool, tried before the fuzzy match.
_SHELL_TOOL_NAMES = (
    "bash",
    "shell",
    "shell_command",
    "exec_command",
    "local_shell",
    "exec",
    "run_shell_command",
    "execute_command",
)
_SHELL_NAME_PARTS = frozenset({"bash", "shell", "exec", "sh", "terminal", "zsh"})
_COMMAND_PROPERTIES = ("command", "cmd", "script", "commands")


class Api(enum.StrEnum):
    """The wire API a request came in on."""

    CHAT = "chat"
    RESPONSES = "responses"
    ANTHROPIC = "anthropic"


class Scenario(enum.StrEnum):
    """What the mock decided to do for one request."""

    AFTER_TOOL = "after-tool"
    POLL_TOOL = "poll-tool"
    ANSWER_NOW = "answer-now"
    SLEEP_TOOL = "sleep-tool"
    STALL = "stall"
    LOOP_TOOL = "loop-tool"
    NARRATE_TOOL = "narrate-tool"
    DELEGATE = "delegate"
    DEFAULT = "default"
    NO_SHELL_TOOL = "no-shell-tool"


@dataclass(frozen=True)
class ToolSpec:
    """One tool offered by the client, normalised across the APIs."""

    name: str
    parameters: JSONObject
    is_local_shell: bool = False


@dataclass(frozen=True)
class Conversation:
    """The facts about a request that the scenario depends on."""

    api: Api
    item_count: int
    tool_results: int
    last_is_tool_result: bool
    last_tool_output: str
    latest_user_text: str
    tools: tuple[ToolSpec, ...]
    stream: bool


@dataclass(frozen=True)
class ToolCall:
    """A tool call the mock makes; `arguments` fits the tool's parameter schema."""

    call_id: str
    item_id: str
    name: str
    command: str
    arguments: JSONObject
    is_local_shell: bool = False

    @property
    def arguments_json(self) -> str:
        """The arguments as the JSON text the APIs carry."""
        return json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    """The answer to one request: final text, or one tool call; maybe a stall."""

    scenario: Scenario
    response_id: str
    text: str | None
    tool_call: ToolCall | None
    input_tokens: int
    output_tokens: int

    @property
    def is_stall(self) -> bool:
        """True when the stream must hang after its first text delta."""
        return self.scenario is Scenario.STALL


class IdSource:
    """Unique ids in the style of the recorded streams (`call_3_974188d0`); thread-safe."""

    def __init__(self) -> None:
        self._counter: Iterator[int] = itertools.count(1)
        self._lock = threading.Lock()

    def make(self, prefix: str) -> str:
        """Return a new id: prefix, a process-wide counter and 8 random hex digits."""
        with self._lock:
            number = next(self._counter)
        return f"{prefix}_{number}_{uuid.uuid4().hex[:8]}"


def as_object(value: JSONValue) -> JSONObject:
    """Return `value` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: JSONValue) -> list[JSONValue]:
    """Return `value` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def as_str(value: JSONValue) -> str:
    """Return `value` if it is a string, else an empty one."""
    return value if isinstance(value, str) else ""


def read_conversation(api: Api, body: JSONObject) -> Conversation:
    """Normalise a request body of any of the three APIs into a `Conversation`."""
    items: list[JSONObject]
    if api is Api.RESPONSES:
        raw_input = body.get("input")
        if isinstance(raw_input, str):
            items = [{"role": "user", "content": raw_input}]
        else:
            items = [as_object(item) for item in as_list(raw_input)]
        is_result = [_is_responses_tool_result(item) for item in items]
        user_text = _latest_user_text(items)
        last_output = _text_of(items[-1].get("output")) if items else ""
    else:
        items = [as_object(message) for message in as_list(body.get("messages"))]
        check = _is_chat_tool_result if api is Api.CHAT else _is_anthropic_tool_result
        is_result = [check(item) for item in items]
        user_text = _latest_user_text(items, skip_tool_results=api is Api.ANTHROPIC)
        last_output = _tool_output_of(items[-1]) if items else ""
    return Conversation(
        api=api,
        item_count=len(items),
        tool_results=sum(is_result),
        last_is_tool_result=bool(is_result) and is_result[-1],
        last_tool_output=last_output if is_result and is_result[-1] else "",
        latest_user_text=user_text,
        tools=tuple(_read_tools(as_list(body.get("tools")))),
        stream=body.get("stream") is True,
    )


def decide_reply(
    conversation: Conversation,
    ids: IdSource,
    *,
    tool_command: str = DEFAULT_TOOL_COMMAND,
    sleep_command: str = DEFAULT_SLEEP_COMMAND,
) -> Reply:
    """Pick the scenario for `conversation` and build the reply (see the module rules)."""
    scenario = _pick_scenario(conversation)
    tool_call: ToolCall | None = None
    if scenario is Scenario.DELEGATE:
        tool_call = _delegation(conversation, ids)
        scenario = Scenario.DELEGATE if tool_call is not None else Scenario.AFTER_TOOL
    if scenario is Scenario.AFTER_TOOL:
        tool_call = _poll_running_session(conversation, ids)
        scenario = Scenario.AFTER_TOOL if tool_call is None else Scenario.POLL_TOOL
    if scenario in (
        Scenario.SLEEP_TOOL,
        Scenario.DEFAULT,
        Scenario.LOOP_TOOL,
        Scenario.NARRATE_TOOL,
    ):
        is_long = scenario is Scenario.SLEEP_TOOL
        command = sleep_command if is_long else tool_command
        tool = find_shell_tool(conversation.tools)
        if tool is None:
            scenario = Scenario.NO_SHELL_TOOL
        else:
            escalate = _has_keyword(conversation.latest_user_text, KEYWORD_ESCALATE)
            tool_call = _make_tool_call(conversation.api, tool, command, is_long, escalate, ids)
    text: str | None = None
    if scenario is Scenario.STALL:
        text = STALL_TEXT
    elif scenario is Scenario.NARRATE_TOOL:
        text = NARRATION_TEXT
    elif tool_call is None:
        text = (
            f"{FINAL_TEXT_PREFIX} scenario={scenario} api={conversation.api} "
            f"items={conversation.item_count} tool_results={conversation.tool_results}"
        )
        repeated = re.findall(re.escape(KEYWORD_REPEAT) + r"(\S+)", conversation.latest_user_text)
        text += "".join(f" {word}" for word in repeated)
        if (
            KEYWORD_REPORT_TOOL in conversation.latest_user_text
            and conversation.last_is_tool_result
        ):
            said = conversation.last_tool_output.strip().splitlines()
            text += TOOL_SAID + (said[0][:200] if said else "")
    prefix = {Api.CHAT: "chatcmpl", Api.RESPONSES: "resp", Api.ANTHROPIC: "msg"}
    return Reply(
        scenario=scenario,
        response_id=ids.make(prefix[conversation.api]),
        text=text,
        tool_call=tool_call,
        input_tokens=count_input_tokens(conversation),
        output_tokens=OUTPUT_TOKENS,
    )


def count_input_tokens(conversation: Conversation) -> int:
    """The made-up input token count: a base plus one per input item."""
    return BASE_INPUT_TOKENS + conversation.item_count


def find_shell_tool(tools: tuple[ToolSpec, ...]) -> ToolSpec | None:
    """Return the first tool that is a shell: exact known names first, then by name parts."""
    for tool in tools:
        if tool.is_local_shell or tool.name.lower() in _SHELL_TOOL_NAMES:
            return tool
    for tool in tools:
        parts = re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", tool.name).lower())
        if _SHELL_NAME_PARTS.intersection(parts):
            return tool
    return None


def build_shell_arguments(
    parameters: JSONObject, command: str, *, is_long: bool, escalate: bool = False
) -> JSONObject:
    """Fill a shell tool's parameter schema with `command` (argv array or string);
    `escalate`: ask to leave the sandbox where the schema lets the call ask it."""
    properties = as_object(parameters.get("properties"))
    required = [as_str(name) for name in as_list(parameters.get("required"))]
    key = next((name for name in _COMMAND_PROPERTIES if name in properties), None)
    if key is None:
        key = next((name for name in required if _json_types(properties.get(name))), "command")
    value: JSONValue = command
    if "array" in _json_types(properties.get(key)):
        value = ["bash", "-lc", command]
    arguments: JSONObject = {key: value}
    if escalate and "sandbox_permissions" in properties:
        arguments["sandbox_permissions"] = "require_escalated"
        if "justification" in properties:
            arguments["justification"] = ESCALATION_JUSTIFICATION
    if is_long:
        if "yield_time_ms" in properties:
            arguments["yield_time_ms"] = LONG_YIELD_TIME_MS
        if "timeout_ms" in properties:
            arguments["timeout_ms"] = LONG_TOOL_TIMEOUT_MS
        elif "timeout" in properties:
            described = as_str(as_object(properties["timeout"]).get("description")).lower()
            is_ms = "millisecond" in described or re.search(r"\bms\b", described) is not None
            arguments["timeout"] = LONG_TOOL_TIMEOUT_MS if is_ms else LONG_TOOL_TIMEOUT_S
    return arguments


def _pick_scenario(conversation: Conversation) -> Scenario:
    text = conversation.latest_user_text
    if _has_keyword(text, KEYWORD_LOOP_TOOL):
        return Scenario.LOOP_TOOL
    if _has_keyword(text, KEYWORD_DELEGATE_MCP):
        return Scenario.DELEGATE
    if conversation.last_is_tool_result:
        return Scenario.AFTER_TOOL
    for keyword, scenario in (
        (KEYWORD_STALL, Scenario.STALL),
        (KEYWORD_SLEEP_TOOL, Scenario.SLEEP_TOOL),
        (KEYWORD_ANSWER_NOW, Scenario.ANSWER_NOW),
        (KEYWORD_NARRATE_TOOL, Scenario.NARRATE_TOOL),
    ):
        if _has_keyword(text, keyword):
            return scenario
    return Scenario.DEFAULT


def _has_keyword(text: str, keyword: str) -> bool:
    # Whole words only: "INSTALL" must not stall.
    return re.search(rf"(?<![\w-]){re.escape(keyword)}(?![\w-])", text) is not None


def _delegation(conversation: Conversation, ids: IdSource) -> ToolCall | None:
    """The next `DELEGATIONS` call of the MCP `spawn` tool; None once all were made (or
    when no such tool is offered): then the final text."""
    tool = next(
        (tool for tool in conversation.tools if re.fullmatch(r"(?:.*_)?spawn", tool.name)),
        None,
    )
    if tool is None or conversation.tool_results >= len(DELEGATIONS):
        return None
    return ToolCall(
        call_id=ids.make("toolu" if conversation.api is Api.ANTHROPIC else "call"),
        item_id=ids.make("fc"),
        name=tool.name,
        command="",
        arguments=DELEGATIONS[conversation.tool_results],
    )


def _poll_running_session(conversation: Conversation, ids: IdSource) -> ToolCall | None:
    # codex's exec_command gives up waiting after yield_time_ms and reports the command
    # as still running; a model would wait on it, so the mock polls with write_stdin.
    running = re.search(r"Process running with session ID (\d+)", conversation.last_tool_output)
    poll_tool = next((tool for tool in conversation.tools if tool.name == "write_stdin"), None)
    if running is None or poll_tool is None:
        return None
    arguments: JSONObject = {
        "session_id": int(running.group(1)),
        "chars": "",
        "yield_time_ms": POLL_YIELD_TIME_MS,
    }
    return ToolCall(
        call_id=ids.make("call"),
        item_id=ids.make("fc"),
        name=poll_tool.name,
        command="",
        arguments=arguments,
    )


def _make_tool_call(
    api: Api, tool: ToolSpec, command: str, is_long: bool, escalate: bool, ids: IdSource
) -> ToolCall:
    if tool.is_local_shell:
        arguments: JSONObject = {"command": ["bash", "-lc", command]}
        if is_long:
            arguments["timeout_ms"] = LONG_TOOL_TIMEOUT_MS
    else:
        arguments = build_shell_arguments(
            tool.parameters, command, is_long=is_long, escalate=escalate
        )
    call_prefix = "toolu" if api is Api.ANTHROPIC else "call"
    item_prefix = "lsh" if tool.is_local_shell else "fc"
    return ToolCall(
        call_id=ids.make(call_prefix),
        item_id=ids.make(item_prefix),
        name=tool.name,
        command=command,
        arguments=arguments,
        is_local_shell=tool.is_local_shell,
    )


def _read_tools(raw_tools: list[JSONValue]) -> Iterator[ToolSpec]:
    for raw in raw_tools:
        tool = as_object(raw)
        if tool.get("type") == "local_shell":
            yield ToolSpec(name="local_shell", parameters={}, is_local_shell=True)
            continue
        function = as_object(tool.get("function"))
        name = as_str(tool.get("name")) or as_str(function.get("name"))
        parameters = tool.get("parameters") or tool.get("input_schema")
        if name:
            yield ToolSpec(
                name=name, parameters=as_object(parameters or function.get("parameters"))
            )


def _json_types(schema: JSONValue) -> list[str]:
    declared = as_object(schema).get("type")
    return [as_str(t) for t in declared] if isinstance(declared, list) else [as_str(declared)]


def _is_chat_tool_result(message: JSONObject) -> bool:
    return message.get("role") in ("tool", "function")


def _is_anthropic_tool_result(message: JSONObject) -> bool:
    content = as_list(message.get("content"))
    return message.get("role") == "user" and any(
        as_object(block).get("type") == "tool_result" for block in content
    )


def _is_responses_tool_result(item: JSONObject) -> bool:
    return as_str(item.get("type")).endswith("_call_output")


def _latest_user_text(items: list[JSONObject], *, skip_tool_results: bool = False) -> str:
    # The trailing run of user messages: codex sends its environment context as a user
    # message next to the prompt, so "the last user message" alone could miss the prompt.
    texts: list[str] = []
    for item in reversed(items):
        is_user = item.get("role") == "user"
        if is_user and not (skip_tool_results and _is_anthropic_tool_result(item)):
            texts.append(_text_of(item.get("content")))
        elif texts:
            break
    return "\n".join(reversed(texts))


def _tool_output_of(message: JSONObject) -> str:
    if message.get("role") != "user":
        return _text_of(message.get("content"))
    blocks = (as_object(block) for block in as_list(message.get("content")))
    return "\n".join(
        _text_of(block.get("content")) for block in blocks if block.get("type") == "tool_result"
    )


def _text_of(content: JSONValue) -> str:
    if isinstance(content, str):
        return content
    parts = (as_object(part) for part in as_list(content))
    return "\n".join(as_str(part.get("text")) for part in parts if "text" in part)
