"""An agent definition's instructions reach the model through the real claude and codex
CLIs (pinned, scripts/install-agents): `spawn {agent, backend}` against the loopback mock
LLM, then the recorded request is read for the definition's body. claude appends it to
its system prompt (`--append-system-prompt=`, one argument); codex sends it as a
developer message (`-c developer_instructions=`, a TOML string). pi's path is in
test_agent_definitions.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

from tests.backends.fixtures.record_codex import API_KEY_VARIABLE
from tests.backends.fixtures.record_codex import MODEL as CODEX_MODEL
from tests.e2e.agents import claude_environment, codex_environment, needs_cli
from tests.e2e.harness import ServerProcess, result_of
from tests.e2e.test_agent_definitions import agent_server, define, user_dir
from tests.mock_llm import KEYWORD_ANSWER_NOW, MockLLM

F = TypeVar("F", bound=Callable[..., Any])

AGENT: Final = "warden"
MARK: Final = "WARDEN-9Z"
# A leading "-" (it must stay a value, not become an option), quotes, a backslash,
# newlines and non-ASCII text: each must arrive exactly as written.
BODY: Final = (
    f'- stay terse; "quote" me\nYou are the {MARK} agent.\nKeep C:\\tmp as written — naïve.'
)
# Beyond U+FFFF: two surrogate escapes in JSON, which TOML refuses.
ASTRAL_BODY: Final = f'- stay terse; "quote" me\nYou are the {MARK} agent \U0001f600.'
PROMPT: Final = f"{KEYWORD_ANSWER_NOW} report"
CLAUDE_SPAWN: Final = {"backend": "claude", "model": "mock-model", "mode": "task"}
# The provider's key is not on the codex backend's allowlist: the spawn's env carries it.
CODEX_SPAWN: Final = {
    "backend": "codex",
    "model": CODEX_MODEL,
    "mode": "task",
    "env": {API_KEY_VARIABLE: "dummy"},
}


def with_cli(name: str) -> Callable[[F], F]:
    """The marks of a test that runs the pinned `name` CLI (skipped when it is missing)."""

    def mark(test: F) -> F:
        for decorator in needs_cli(name):
            test = decorator(test)
        return test

    return mark


async def run_agent(server: ServerProcess, spawn: dict[str, Any], argument: str) -> dict[str, Any]:
    """Preflight shows `argument` in the child's argv; then the agent's run completes."""
    params = {**spawn, "agent": AGENT, "prompt": PROMPT}
    checked = await result_of(server, "preflight", params)
    argv = checked["plan"]["children"][0]["argv"]
    assert argv.count(argument) == 1, argv
    run: dict[str, Any] = await result_of(server, "spawn", params)
    assert run["status"] == "completed", run
    child = run["children"][0]
    assert child["output"]["text"].startswith("MOCK-FINAL: scenario=answer-now"), run
    return run


def only_request(mock: MockLLM, path: str) -> tuple[dict[str, Any], str]:
    """The one model request the run made (parsed, and its raw body)."""
    found = [r for r in mock.requests if r.path.split("?")[0] == path]
    assert len(found) == 1, [r.path for r in mock.requests]
    body: dict[str, Any] = json.loads(found[0].raw_body)
    return body, found[0].raw_body


@with_cli("claude")
async def test_claude_gets_the_definitions_body_appended_to_its_system_prompt(
    tmp_path: Path, mock: MockLLM
) -> None:
    define(user_dir(tmp_path) / "agents", AGENT, "guards the gate", BODY)
    env = claude_environment(tmp_path, mock.base_url)
    async with agent_server(tmp_path, env) as server:
        await run_agent(server, CLAUDE_SPAWN, f"--append-system-prompt={BODY}")
        await server.finish()

    request, raw = only_request(mock, "/v1/messages")
    texts = [block["text"] for block in request["system"] if block.get("type") == "text"]
    assert len(texts) == len(request["system"]), request["system"]
    # Appended, whole and once, at the end of Claude Code's own system prompt (kept).
    assert texts[-1].endswith("\n\n" + BODY), texts[-1][-500:]
    assert sum(text.count(BODY) for text in texts) == 1
    assert any("You are Claude Code" in text for text in texts)
    # Nowhere else: the prompt is the request's, not the instructions.
    assert raw.count(MARK) == 1
    assert MARK not in json.dumps(request["messages"])
    assert PROMPT in json.dumps(request["messages"])


def developer_parts(request: dict[str, Any]) -> list[str]:
    """The text of every content part of the request's developer messages, in order."""
    return [
        part["text"]
        for item in request["input"]
        if item.get("type") == "message" and item.get("role") == "developer"
        for part in item["content"]
        if part.get("type") == "input_text"
    ]


async def codex_request(tmp_path: Path, mock: MockLLM, body: str) -> tuple[dict[str, Any], str]:
    """Run the agent defined with `body` on codex; its one request to the mock."""
    define(user_dir(tmp_path) / "agents", AGENT, "guards the gate", body)
    env = codex_environment(tmp_path, mock.openai_base_url)
    async with agent_server(tmp_path, env) as server:
        await run_agent(
            server, CODEX_SPAWN, f"developer_instructions={json.dumps(body, ensure_ascii=False)}"
        )
        await server.finish()
    return only_request(mock, "/v1/responses")


@with_cli("codex")
async def test_codex_gets_the_definitions_body_as_a_developer_message(
    tmp_path: Path, mock: MockLLM
) -> None:
    request, raw = await codex_request(tmp_path, mock, BODY)
    parts = developer_parts(request)
    # One developer content part that is exactly the body, beside codex's own prompt.
    assert parts.count(BODY) == 1, parts
    assert any(part.startswith("You are Codex") for part in parts), parts
    assert raw.count(MARK) == 1  # not in `instructions`, not in a user message
    assert "instructions" not in request or MARK not in request["instructions"]
    users = [i for i in request["input"] if i.get("role") == "user"]
    assert MARK not in json.dumps(users) and PROMPT in json.dumps(users)


@with_cli("codex")
async def test_codex_gets_a_body_beyond_the_basic_plane_unchanged(
    tmp_path: Path, mock: MockLLM
) -> None:
    request, _ = await codex_request(tmp_path, mock, ASTRAL_BODY)
    assert developer_parts(request).count(ASTRAL_BODY) == 1, developer_parts(request)
