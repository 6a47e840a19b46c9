"""The mock LLM server (`tests/mock_llm`) speaks the three APIs the real agent CLIs use.

Each API is driven the way a CLI drives it (urllib for whole JSON answers, http.client
for SSE streams) and the answers are checked for the shapes the CLIs parse: a shell
tool call on the first turn, final text after a tool result, the keyword scenarios,
stalls that end on close, the request log, and loopback-only binding.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.mock_llm import (
    BASE_INPUT_TOKENS,
    DEFAULT_TOOL_COMMAND,
    DELEGATIONS,
    ESCALATION_JUSTIFICATION,
    FINAL_TEXT_PREFIX,
    KEYWORD_ESCALATE,
    KEYWORD_NARRATE_TOOL,
    KEYWORD_REPORT_TOOL,
    NARRATION_TEXT,
    OUTPUT_TOKENS,
    TOOL_SAID,
    MockLLM,
    RecordedRequest,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
# Generous bound on anything that should be near-instant on loopback.
IO_TIMEOUT_S = 10.0

Event = tuple[str | None, str]
"""One SSE event: its `event:` name (None if absent) and its `data:` text."""

# Tool definitions as each real CLI sends them (trimmed to what the mock reads).
PI_BASH_CHAT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {
            "type": "object",
            "required": ["command"],
            "properties": {
                "command": {"type": "string", "description": "Bash command to execute"},
                "timeout": {"type": "number", "description": "Timeout in seconds (optional)"},
            },
        },
    },
}
PI_READ_CHAT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "read",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
CODEX_EXEC_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "exec_command",
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {
            "cmd": {"type": "string", "description": "Shell command to execute."},
            "workdir": {"type": "string"},
            "yield_time_ms": {"type": "number"},
        },
        "required": ["cmd"],
    },
}
CODEX_WRITE_STDIN_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "write_stdin",
    "parameters": {
        "type": "object",
        "properties": {"session_id": {"type": "number"}, "chars": {"type": "string"}},
        "required": ["session_id"],
    },
}
CODEX_ARGV_SHELL_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "shell",
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "array", "items": {"type": "string"}},
            "timeout_ms": {"type": "number"},
        },
        "required": ["command"],
    },
}
CLAUDE_BASH_TOOL: dict[str, Any] = {
    "name": "Bash",
    "input_schema": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to execute"},
            "timeout": {"type": "number", "description": "Optional timeout in milliseconds"},
        },
        "required": ["command"],
    },
}
CLAUDE_READ_TOOL: dict[str, Any] = {
    "name": "Read",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
}


@pytest.fixture
def mock() -> Iterator[MockLLM]:
    with MockLLM() as server:
        yield server


def post_json(mock: MockLLM, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST `body` as JSON; return the status and the decoded JSON answer."""
    request = urllib.request.Request(
        mock.base_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=IO_TIMEOUT_S) as response:
            status, payload = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, payload = error.code, error.read()
    decoded: dict[str, Any] = json.loads(payload)
    return status, decoded


@contextmanager
def open_stream(
    mock: MockLLM, path: str, body: dict[str, Any]
) -> Iterator[http.client.HTTPResponse]:
    """POST a streaming request; yield the response, headers read, body unread."""
    connection = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=IO_TIMEOUT_S)
    try:
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type") == "text/event-stream"
        yield response
    finally:
        connection.close()


def parse_sse(text: str) -> list[Event]:
    """Split an SSE body into (event name, data) pairs."""
    events: list[Event] = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        name: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data.append(line.removeprefix("data: "))
        events.append((name, "\n".join(data)))
    return events


def stream_events(mock: MockLLM, path: str, body: dict[str, Any]) -> list[Event]:
    """POST a streaming request and return all its SSE events."""
    with open_stream(mock, path, {**body, "stream": True}) as response:
        return parse_sse(response.read().decode())


def payloads(events: list[Event]) -> list[dict[str, Any]]:
    """The JSON payloads of the events (skipping `[DONE]`)."""
    return [json.loads(data) for _, data in events if data != "[DONE]"]


def chat_body(
    *messages: dict[str, Any], tools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "model": "mock-model",
        "messages": list(messages),
        "tools": [PI_READ_CHAT_TOOL, PI_BASH_CHAT_TOOL] if tools is None else tools,
        "stream_options": {"include_usage": True},
    }


def responses_body(
    *items: dict[str, Any], tools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "model": "gpt-5.5",
        "input": list(items),
        "tools": [CODEX_EXEC_TOOL, CODEX_WRITE_STDIN_TOOL] if tools is None else tools,
    }


def anthropic_body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "mock-claude",
        "max_tokens": 1024,
        "messages": list(messages),
        "tools": [CLAUDE_READ_TOOL, CLAUDE_BASH_TOOL],
    }


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def responses_user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def chat_text(events: list[Event]) -> str:
    return "".join(
        chunk["choices"][0]["delta"].get("content") or ""
        for chunk in payloads(events)
        if chunk["choices"]
    )


def chat_tool_call(mock: MockLLM, prompt: str) -> tuple[str, dict[str, Any]]:
    """Stream one chat turn that must be a tool call; return the tool's name and args."""
    chunks = payloads(stream_events(mock, "/v1/chat/completions", chat_body(user(prompt))))
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    calls = [call for delta in deltas for call in delta.get("tool_calls", [])]
    arguments = "".join(call["function"]["arguments"] for call in calls)
    return calls[0]["function"]["name"], json.loads(arguments)


def anthropic_blocks(events: list[Event]) -> dict[str, Any]:
    """Rebuild the streamed message: start, blocks with joined deltas, final delta."""
    message: dict[str, Any] = {}
    for payload in payloads(events):
        kind = payload["type"]
        if kind == "message_start":
            message = {**payload["message"], "content": []}
        elif kind == "content_block_start":
            message["content"].append({**payload["content_block"], "partial": ""})
        elif kind == "content_block_delta":
            delta, block = payload["delta"], message["content"][payload["index"]]
            block["partial"] += delta.get("partial_json") or delta.get("text") or ""
        elif kind == "message_delta":
            message.update(payload["delta"], final_usage=payload["usage"])
    return message


def test_chat_stream_first_turn_is_a_bash_tool_call_with_usage_and_done(mock: MockLLM) -> None:
    events = stream_events(mock, "/v1/chat/completions", chat_body(user("list files")))

    assert events[-1] == (None, "[DONE]")
    chunks = payloads(events)
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    calls = [
        call
        for chunk in chunks
        if chunk["choices"]
        for call in chunk["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert calls[0]["id"].startswith("call_")
    assert calls[0]["type"] == "function"
    assert calls[0]["function"]["name"] == "bash"
    assert len(calls) > 2, "arguments arrive in several deltas"
    arguments = "".join(call["function"]["arguments"] for call in calls)
    assert json.loads(arguments) == {"command": DEFAULT_TOOL_COMMAND}
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finish[-1] == "tool_calls"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {
        "prompt_tokens": BASE_INPUT_TOKENS + 1,
        "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": BASE_INPUT_TOKENS + 1 + OUTPUT_TOKENS,
    }


def test_chat_stream_answers_final_text_after_a_tool_result(mock: MockLLM) -> None:
    body = chat_body(
        {"role": "system", "content": "be brief"},
        user("list files"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "mock-tool-ran\n"},
    )
    events = stream_events(mock, "/v1/chat/completions", body)

    text = chat_text(events)
    assert text.startswith(FINAL_TEXT_PREFIX)
    assert "scenario=after-tool" in text
    assert "items=4" in text, "the item count lets a test see that history was resent"
    finish = [c["choices"][0]["finish_reason"] for c in payloads(events) if c["choices"]]
    assert finish[-1] == "stop"


def test_a_final_text_after_a_tool_tells_its_first_line_when_asked_to(mock: MockLLM) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "refused: no\nmore\n"}
    for prompt, told in (("write it", ""), (f"{KEYWORD_REPORT_TOOL} write it", "refused: no")):
        assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
        body = chat_body(user(prompt), assistant, result)
        text = chat_text(stream_events(mock, "/v1/chat/completions", body))
        assert text.endswith(f"{TOOL_SAID}{told}") is bool(told), text
        assert (TOOL_SAID in text) is bool(told), text


def test_chat_without_stream_returns_one_completion_object(mock: MockLLM) -> None:
    status, answer = post_json(mock, "/v1/chat/completions", chat_body(user("go")))

    assert status == 200
    assert answer["object"] == "chat.completion"
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"command": DEFAULT_TOOL_COMMAND}
    assert answer["usage"]["total_tokens"] == answer["usage"]["prompt_tokens"] + OUTPUT_TOKENS


def test_chat_without_a_shell_tool_answers_with_text(mock: MockLLM) -> None:
    events = stream_events(
        mock, "/v1/chat/completions", chat_body(user("go"), tools=[PI_READ_CHAT_TOOL])
    )

    assert "scenario=no-shell-tool" in chat_text(events)


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        (CODEX_EXEC_TOOL, {"cmd": DEFAULT_TOOL_COMMAND}),
        (CODEX_ARGV_SHELL_TOOL, {"command": ["bash", "-lc", DEFAULT_TOOL_COMMAND]}),
    ],
)
def test_responses_stream_calls_the_shell_tool_with_arguments_fitting_its_schema(
    mock: MockLLM, tool: dict[str, Any], expected: dict[str, Any]
) -> None:
    body = responses_body(responses_user("list files"), tools=[CODEX_WRITE_STDIN_TOOL, tool])
    events = stream_events(mock, "/v1/responses", body)

    names = [name for name, _ in events]
    assert names == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        *["response.function_call_arguments.delta"] * (len(names) - 6),
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    data = payloads(events)
    assert [payload["type"] for payload in data] == names
    assert [payload["sequence_number"] for payload in data] == list(range(len(data)))
    added = data[2]["item"]
    assert added["type"] == "function_call"
    assert added["name"] == tool["name"]
    assert added["call_id"].startswith("call_")
    deltas = "".join(p["delta"] for p in data if p["type"].endswith("arguments.delta"))
    assert json.loads(deltas) == expected
    assert data[-3]["arguments"] == deltas
    done = data[-2]["item"]
    assert done["status"] == "completed"
    assert json.loads(done["arguments"]) == expected
    response = data[-1]["response"]
    assert response["status"] == "completed"
    assert response["output"] == [done]
    assert response["usage"] == {
        "input_tokens": BASE_INPUT_TOKENS + 1,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": OUTPUT_TOKENS,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": BASE_INPUT_TOKENS + 1 + OUTPUT_TOKENS,
    }


CODEX_ESCALATING_EXEC_TOOL: dict[str, Any] = {
    **CODEX_EXEC_TOOL,
    "parameters": {
        "type": "object",
        "properties": {
            **CODEX_EXEC_TOOL["parameters"]["properties"],
            "sandbox_permissions": {"type": "string"},
            "justification": {"type": "string"},
        },
        "required": ["cmd"],
    },
}


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        (
            CODEX_ESCALATING_EXEC_TOOL,
            {
                "cmd": DEFAULT_TOOL_COMMAND,
                "sandbox_permissions": "require_escalated",
                "justification": ESCALATION_JUSTIFICATION,
            },
        ),
        (CODEX_EXEC_TOOL, {"cmd": DEFAULT_TOOL_COMMAND}),
    ],
)
def test_escalate_asks_to_leave_the_sandbox_where_the_tool_lets_a_call_ask_it(
    mock: MockLLM, tool: dict[str, Any], expected: dict[str, Any]
) -> None:
    body = responses_body(responses_user(f"{KEYWORD_ESCALATE} write it"), tools=[tool])
    data = payloads(stream_events(mock, "/v1/responses", body))

    assert json.loads(data[-2]["item"]["arguments"]) == expected


def test_responses_stream_answers_final_text_after_a_function_call_output(mock: MockLLM) -> None:
    body = responses_body(
        {"type": "message", "role": "developer", "content": "rules"},
        responses_user("<environment_context>cwd</environment_context>"),
        responses_user("list files"),
        {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "Process exited"},
    )
    events = stream_events(mock, "/v1/responses", body)

    names = [name for name, _ in events]
    assert names[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert names[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    data = payloads(events)
    text = "".join(p["delta"] for p in data if p["type"] == "response.output_text.delta")
    assert text.startswith(FINAL_TEXT_PREFIX)
    assert "items=5" in text
    assert data[-4]["text"] == text
    message = data[-2]["item"]
    assert message["type"] == "message"
    assert message["content"] == [{"type": "output_text", "text": text, "annotations": []}]


def test_responses_polls_a_codex_command_that_is_still_running(mock: MockLLM) -> None:
    running = "Chunk ID: 1\nWall time: 30.0 seconds\nProcess running with session ID 4242\n"
    body = responses_body(
        responses_user("SLEEP-TOOL"),
        {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": running},
    )
    data = payloads(stream_events(mock, "/v1/responses", body))

    done = data[-2]["item"]
    assert done["name"] == "write_stdin"
    assert json.loads(done["arguments"])["session_id"] == 4242


def test_responses_without_stream_returns_the_response_object(mock: MockLLM) -> None:
    status, answer = post_json(mock, "/v1/responses", responses_body(responses_user("go")))

    assert status == 200
    assert answer["object"] == "response"
    assert answer["status"] == "completed"
    assert answer["output"][0]["type"] == "function_call"
    assert answer["usage"]["output_tokens"] == OUTPUT_TOKENS


def test_anthropic_stream_first_turn_is_a_bash_tool_use(mock: MockLLM) -> None:
    events = stream_events(mock, "/v1/messages?beta=true", anthropic_body(user("list files")))

    names = [name for name, _ in events]
    assert names[0] == "message_start"
    assert names[-2:] == ["message_delta", "message_stop"]
    assert [p["type"] for p in payloads(events)] == names
    message = anthropic_blocks(events)
    assert message["usage"]["input_tokens"] == BASE_INPUT_TOKENS + 1
    [block] = message["content"]
    assert block["type"] == "tool_use"
    assert block["name"] == "Bash"
    assert block["id"].startswith("toolu_")
    assert block["input"] == {}
    assert json.loads(block["partial"]) == {"command": DEFAULT_TOOL_COMMAND}
    assert message["stop_reason"] == "tool_use"
    assert message["final_usage"] == {"output_tokens": OUTPUT_TOKENS}


def test_anthropic_stream_answers_final_text_after_a_tool_result(mock: MockLLM) -> None:
    body = anthropic_body(
        user("list files"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
        },
    )
    message = anthropic_blocks(stream_events(mock, "/v1/messages", body))

    [block] = message["content"]
    assert block["type"] == "text"
    assert block["partial"].startswith(FINAL_TEXT_PREFIX)
    assert "items=3" in block["partial"]
    assert message["stop_reason"] == "end_turn"


def test_anthropic_without_stream_returns_one_message(mock: MockLLM) -> None:
    status, answer = post_json(mock, "/v1/messages", anthropic_body(user("go")))

    assert status == 200
    assert answer["type"] == "message"
    assert answer["stop_reason"] == "tool_use"
    assert answer["content"][0]["input"] == {"command": DEFAULT_TOOL_COMMAND}


def test_anthropic_count_tokens_answers_input_tokens(mock: MockLLM) -> None:
    status, answer = post_json(
        mock, "/v1/messages/count_tokens", anthropic_body(user("a"), user("b"))
    )

    assert status == 200
    assert answer == {"input_tokens": BASE_INPUT_TOKENS + 2}


def test_answer_now_gives_final_text_at_once_on_every_api(mock: MockLLM) -> None:
    prompt = "ANSWER-NOW: what is 1+1?"
    chat = chat_text(stream_events(mock, "/v1/chat/completions", chat_body(user(prompt))))
    responses = payloads(
        stream_events(mock, "/v1/responses", responses_body(responses_user(prompt)))
    )
    anthropic = anthropic_blocks(stream_events(mock, "/v1/messages", anthropic_body(user(prompt))))

    assert "scenario=answer-now" in chat
    response_text = responses[-1]["response"]["output"][0]["content"][0]["text"]
    assert "scenario=answer-now" in response_text
    assert "scenario=answer-now" in anthropic["content"][0]["partial"]


def test_narrate_tool_says_something_and_calls_the_shell_in_one_response(mock: MockLLM) -> None:
    prompt = f"{KEYWORD_NARRATE_TOOL} please"
    chat = stream_events(mock, "/v1/chat/completions", chat_body(user(prompt)))
    name, arguments = chat_tool_call(mock, prompt)
    claude = anthropic_blocks(stream_events(mock, "/v1/messages", anthropic_body(user(prompt))))
    responses = payloads(
        stream_events(mock, "/v1/responses", responses_body(responses_user(prompt)))
    )

    assert chat_text(chat) == NARRATION_TEXT
    assert (name, arguments) == ("bash", {"command": DEFAULT_TOOL_COMMAND})
    assert [block["type"] for block in claude["content"]] == ["text", "tool_use"]
    assert claude["content"][0]["partial"] == NARRATION_TEXT
    assert claude["stop_reason"] == "tool_use"
    output = responses[-1]["response"]["output"]
    assert [item["type"] for item in output] == ["message", "function_call"]
    assert output[0]["content"][0]["text"] == NARRATION_TEXT


def test_sleep_tool_runs_the_sleep_command_with_a_long_enough_tool_timeout(mock: MockLLM) -> None:
    name, arguments = chat_tool_call(mock, "please SLEEP-TOOL")
    claude = anthropic_blocks(
        stream_events(mock, "/v1/messages", anthropic_body(user("SLEEP-TOOL")))
    )

    assert name == "bash"
    assert arguments == {"command": "sleep 300", "timeout": 600}
    assert json.loads(claude["content"][0]["partial"]) == {
        "command": "sleep 300",
        "timeout": 600_000,
    }


def test_loop_tool_calls_the_shell_again_after_every_tool_result(mock: MockLLM) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    body = chat_body(
        user("LOOP-TOOL for ever"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "mock-tool-ran\n"},
    )
    chunks = payloads(stream_events(mock, "/v1/chat/completions", body))
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    calls = [call for delta in deltas for call in delta.get("tool_calls", [])]
    assert calls and calls[0]["function"]["name"] == "bash"
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {
        "command": DEFAULT_TOOL_COMMAND
    }


MCP_SPAWN_TOOL: dict[str, Any] = {
    "name": "mcp__subagent-host__spawn",
    "input_schema": {"type": "object", "properties": {"command": {"type": "array"}}},
}


def tool_use(block: dict[str, Any]) -> dict[str, Any]:
    return {key: block[key] for key in ("type", "id", "name")}


def test_delegate_mcp_calls_the_spawn_tool_twice_then_answers(mock: MockLLM) -> None:
    messages: list[dict[str, Any]] = [user("DELEGATE-MCP please")]
    for expected in DELEGATIONS:
        body = {**anthropic_body(*messages), "tools": [CLAUDE_BASH_TOOL, MCP_SPAWN_TOOL]}
        [block] = anthropic_blocks(stream_events(mock, "/v1/messages", body))["content"]
        assert block["type"] == "tool_use" and block["name"] == "mcp__subagent-host__spawn"
        assert json.loads(block["partial"]) == expected
        messages += [
            {
                "role": "assistant",
                "content": [{**tool_use(block), "input": expected}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": "ok"}],
            },
        ]
    body = {**anthropic_body(*messages), "tools": [CLAUDE_BASH_TOOL, MCP_SPAWN_TOOL]}
    [block] = anthropic_blocks(stream_events(mock, "/v1/messages", body))["content"]
    assert block["type"] == "text" and block["partial"].startswith(FINAL_TEXT_PREFIX)


def test_tool_commands_are_configurable() -> None:
    with MockLLM(tool_command="true", sleep_command="sleep 7") as mock:
        assert chat_tool_call(mock, "go")[1] == {"command": "true"}
        assert chat_tool_call(mock, "SLEEP-TOOL")[1]["command"] == "sleep 7"


def test_keywords_match_whole_words_only(mock: MockLLM) -> None:
    assert chat_tool_call(mock, "INSTALL the package")[1] == {"command": DEFAULT_TOOL_COMMAND}


def test_tool_call_ids_are_unique_per_request(mock: MockLLM) -> None:
    ids = set()
    for _ in range(3):
        _, answer = post_json(mock, "/v1/chat/completions", chat_body(user("go")))
        ids.add(answer["choices"][0]["message"]["tool_calls"][0]["id"])

    assert len(ids) == 3


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", chat_body(user("STALL"))),
        ("/v1/responses", responses_body(responses_user("STALL"))),
        ("/v1/messages", anthropic_body(user("STALL"))),
    ],
)
def test_stall_streams_a_start_then_hangs_until_close(path: str, body: dict[str, Any]) -> None:
    mock = MockLLM().start()
    with open_stream(mock, path, {**body, "stream": True}) as response:
        received = b""
        try:
            while b"delta" not in received:
                received += response.read1()
            assert not mock.is_closing
        finally:
            closer = threading.Thread(target=mock.close)
            closer.start()
            closer.join(IO_TIMEOUT_S)
        assert not closer.is_alive(), "close() must unblock a stalled stream"
        try:
            rest = response.read()
        except http.client.IncompleteRead as cut:
            rest = cut.partial

    assert b"[DONE]" not in received + rest
    assert b"completed" not in received + rest
    assert b"message_stop" not in received + rest


def test_stall_without_stream_hangs_until_close() -> None:
    mock = MockLLM().start()
    outcome: list[BaseException | int] = []

    def ask() -> None:
        try:
            outcome.append(post_json(mock, "/v1/messages", anthropic_body(user("STALL")))[0])
        except (OSError, http.client.HTTPException) as error:
            outcome.append(error)

    asker = threading.Thread(target=ask)
    asker.start()
    mock.wait_for_request(lambda request: "STALL" in request.raw_body, IO_TIMEOUT_S)
    assert asker.is_alive()
    mock.close()
    asker.join(IO_TIMEOUT_S)

    assert not asker.is_alive()
    assert len(outcome) == 1 and not isinstance(outcome[0], int)
    mock.close()  # A second close is harmless.
    assert [request.path for request in mock.requests] == ["/v1/messages"]


def test_head_and_get_root_answer_200(mock: MockLLM) -> None:
    with closing(http.client.HTTPConnection("127.0.0.1", mock.port, timeout=IO_TIMEOUT_S)) as conn:
        conn.request("HEAD", "/")
        head = conn.getresponse()
        head_body = head.read()
        conn.request("GET", "/")
        get = conn.getresponse()
        get_body = get.read()

    assert (head.status, head_body) == (200, b"")
    assert (get.status, get_body) == (200, b"mock-llm ok\n")


def test_unknown_routes_answer_404(mock: MockLLM) -> None:
    status, answer = post_json(mock, "/v1/embeddings", {"input": "x"})

    assert status == 404
    assert answer["type"] == "error"


def test_every_request_is_logged_with_its_parsed_body(mock: MockLLM) -> None:
    before = time.time()
    post_json(mock, "/v1/chat/completions", chat_body(user("ANSWER-NOW PINEAPPLE42")))
    post_json(mock, "/v1/messages", anthropic_body(user("ANSWER-NOW other")))

    first, second = mock.requests
    assert (first.method, first.path) == ("POST", "/v1/chat/completions")
    assert first.body_object()["model"] == "mock-model"
    assert first.headers["content-type"] == "application/json"
    assert before <= first.time <= second.time <= time.time()
    assert mock.requests_containing("PINEAPPLE42") == [first]
    assert mock.requests_containing("nowhere") == []


def test_wait_for_request_sees_past_and_future_requests_and_times_out(mock: MockLLM) -> None:
    post_json(mock, "/v1/messages", anthropic_body(user("ANSWER-NOW one")))
    past = mock.wait_for_request(lambda request: "one" in request.raw_body, IO_TIMEOUT_S)
    sender = threading.Thread(
        target=post_json, args=(mock, "/v1/messages", anthropic_body(user("ANSWER-NOW two")))
    )
    sender.start()
    future = mock.wait_for_request(lambda request: "two" in request.raw_body, IO_TIMEOUT_S)
    sender.join(IO_TIMEOUT_S)

    assert isinstance(past, RecordedRequest) and "one" in past.raw_body
    assert "two" in future.raw_body
    with pytest.raises(TimeoutError):
        mock.wait_for_request(lambda request: request.method == "DELETE", timeout=0.05)


def test_binds_to_127_0_0_1_only(mock: MockLLM) -> None:
    assert mock.base_url == f"http://127.0.0.1:{mock.port}"
    assert mock.openai_base_url == f"http://127.0.0.1:{mock.port}/v1"
    assert mock.port > 0
    for host in ("0.0.0.0", "", "localhost", "::1", "192.168.1.1"):
        with pytest.raises(ValueError, match="127.0.0.1"):
            MockLLM(host=host)


def test_module_prints_its_port_and_serves_until_stdin_closes() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "tests.mock_llm", "--port", "0"],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None and process.stdin is not None
            port = int(process.stdout.readline())
            with closing(
                http.client.HTTPConnection("127.0.0.1", port, timeout=IO_TIMEOUT_S)
            ) as conn:
                conn.request("HEAD", "/")
                assert conn.getresponse().status == 200
            process.stdin.close()
            assert process.wait(IO_TIMEOUT_S) == 0
        finally:
            if process.poll() is None:
                process.kill()
