"""The real Claude Code CLI (pinned, scripts/install-agents) run through the server,
against the loopback mock LLM: completion, protected resume, stop in the middle of a
tool, and an unreachable model. Nothing leaves 127.0.0.1: the CLI gets the mock as
ANTHROPIC_BASE_URL and every switch that turns its other traffic off."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import psutil

from tests.backends.fixtures.record_claude import OFFLINE
from tests.e2e.agents import (
    AGENT_BIN,
    WRITE_ATTEMPT,
    lean_loads_no_context_file,
    needs_cli,
    read_only_cannot_write,
    server_args,
    stop_in_the_middle_of_a_tool,
)
from tests.e2e.harness import assert_no_run_survives, result_of, running_server
from tests.mock_llm import KEYWORD_ANSWER_NOW, MockLLM

pytestmark = needs_cli("claude")


def claude_environment(tmp_path: Path, base_url: str, **extra: str) -> dict[str, str]:
    """The server's environment: claude on PATH, pointed at the mock, its own directories."""
    home, config = tmp_path / "home", tmp_path / "claude-config"
    home.mkdir()
    config.mkdir()
    return {
        "PATH": f"{AGENT_BIN}:{psutil.Process().environ().get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(config),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "dummy",
        **OFFLINE,
        **extra,
    }


SPAWN: Final = {"backend": "claude", "model": "mock-model", "tools": ["Bash", "Read"]}


async def test_a_claude_run_completes_with_the_mocks_answer_usage_and_a_session(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = claude_environment(tmp_path, mock.base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        run = await result_of(server, "spawn", {**SPAWN, "prompt": "look around", "mode": "task"})
        child = run["children"][0]
        assert run["status"] == "completed", run
        assert child["output"]["text"].startswith("MOCK-FINAL: scenario=after-tool")
        assert child["usage"]["inputTokens"] > 0 and child["usage"]["outputTokens"] > 0
        assert child["usage"]["costUsd"] > 0
        assert child["backendSessionId"]
        await server.finish()
    # It talked to the mock only: its probe of the base URL, then the messages API.
    assert {request.path.split("?")[0] for request in mock.requests} == {"/", "/v1/messages"}


async def test_a_resumed_claude_child_continues_its_session(tmp_path: Path, mock: MockLLM) -> None:
    env = claude_environment(tmp_path, mock.base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        first = await result_of(
            server, "spawn", {**SPAWN, "prompt": "remember PINEAPPLE42", "mode": "task"}
        )
        assert first["status"] == "completed", first
        session = first["children"][0]["backendSessionId"]
        approved = await result_of(
            server,
            "preflight",
            {"resume": {"runId": first["runId"], "message": f"{KEYWORD_ANSWER_NOW} and now?"}},
        )
        assert approved["accepted"], approved
        assert approved["contract"]["backendSessionId"] == session
        resumed = await result_of(server, "resume", {"token": approved["token"], "mode": "task"})
        child = resumed["children"][0]
        assert resumed["status"] == "completed" and child["attempt"] == 2, resumed
        assert child["backendSessionId"] == session
        assert "items=5 tool_results=1" in child["output"]["text"]
        await server.finish()
    # The resumed turn sent the earlier conversation again: the first prompt, the tool's
    # result, and the new message.
    last = mock.requests[-1].raw_body
    assert "PINEAPPLE42" in last and "mock-tool-ran" in last and "and now?" in last


async def test_stop_in_the_middle_of_a_claude_tool_leaves_nothing(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = claude_environment(tmp_path, mock.base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        run_id = await stop_in_the_middle_of_a_tool(server, SPAWN, "Bash")
        # Claude Code's Bash tool runs in a session of its own and outlives a SIGTERM of
        # the CLI: the stop sequence itself must have ended it, not the server's exit.
        assert_no_run_survives({run_id})
        await server.finish()
    # running_server proved again that no process carrying the run's marker survived.


async def test_an_unreachable_model_ends_failed(tmp_path: Path) -> None:
    with MockLLM() as gone:
        base_url = gone.base_url
    env = claude_environment(tmp_path, base_url, CLAUDE_CODE_MAX_RETRIES="1")
    async with running_server(*server_args(tmp_path), env=env) as server:
        run = await result_of(server, "spawn", {**SPAWN, "prompt": "hello", "mode": "task"})
        assert run["status"] == "failed", run
        error = run["children"][0]["error"]
        assert error["code"] == "agent-error" and "Unable to connect" in error["message"]
        await server.finish()


async def test_a_read_only_claude_launch_cannot_write_a_file(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with MockLLM(tool_command=WRITE_ATTEMPT) as mock:
        env = claude_environment(tmp_path, mock.base_url)
        async with running_server(*server_args(tmp_path), env=env) as server:
            receipt = await read_only_cannot_write(server, SPAWN, work)
            await server.finish()
        offered: Any = mock.requests_containing("try to write")[-1].body_object()["tools"]
    # Bash was taken away (it can write), and the receipt says so and why.
    assert [tool["name"] for tool in offered] == ["Read"]
    assert [tool["name"] for tool in receipt["removedTools"]] == ["Bash"]
    assert "filesystem-write" in receipt["removedTools"][0]["exceeds"]
    assert receipt["effects"] == ["filesystem-read"]


async def test_a_lean_claude_child_loads_no_context_file_and_a_full_one_does(
    tmp_path: Path, mock: MockLLM
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = claude_environment(tmp_path, mock.base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        shown = await lean_loads_no_context_file(server, SPAWN, work, mock)
        await server.finish()
    assert shown["sessionResources"] == "lean" and "--safe-mode" in shown["argv"]
