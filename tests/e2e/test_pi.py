"""The real pi CLI (pinned, scripts/install-agents) run through the server, against the
loopback mock LLM: completion, protected resume, stop in the middle of a tool, and an
unreachable model. Nothing leaves 127.0.0.1 (pi runs with PI_OFFLINE, no version check
and no telemetry)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import psutil

from tests.backends.fixtures.record_pi import NO_RETRIES, models
from tests.e2e.agents import (
    AGENT_BIN,
    WRITE_ATTEMPT,
    lean_loads_no_context_file,
    needs_cli,
    read_only_cannot_write,
    server_args,
    stop_in_the_middle_of_a_tool,
)
from tests.e2e.harness import error_of, result_of, running_server
from tests.mock_llm import KEYWORD_ANSWER_NOW, MockLLM

pytestmark = needs_cli("pi")


def pi_environment(tmp_path: Path, base_url: str, *, retries: bool = True) -> dict[str, str]:
    """The server's environment: pi on PATH, its agent directory pointing at the mock."""
    agent_dir = tmp_path / "pi-agent"
    agent_dir.mkdir()
    (agent_dir / "models.json").write_text(json.dumps(models(base_url)))
    if not retries:
        (agent_dir / "settings.json").write_text(json.dumps(NO_RETRIES))
    home = tmp_path / "home"
    home.mkdir()
    return {
        "PATH": f"{AGENT_BIN}:{psutil.Process().environ().get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
    }


SPAWN: Final = {"backend": "pi", "model": "mock/mock-model", "tools": ["bash", "read"]}


async def test_a_pi_run_completes_with_the_mocks_answer_usage_and_a_session(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        run = await result_of(server, "spawn", {**SPAWN, "prompt": "look around", "mode": "task"})
        child = run["children"][0]
        assert run["status"] == "completed", run
        assert child["output"]["text"].startswith("MOCK-FINAL: scenario=after-tool")
        assert child["usage"]["inputTokens"] > 0 and child["usage"]["outputTokens"] > 0
        assert child["backendSessionId"]
        await server.finish()
    assert all(request.path.startswith("/v1/") for request in mock.requests)


async def test_a_resumed_pi_child_continues_its_session(tmp_path: Path, mock: MockLLM) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        first = await result_of(
            server, "spawn", {**SPAWN, "prompt": "remember PINEAPPLE42", "mode": "task"}
        )
        approved = await result_of(
            server,
            "preflight",
            {"resume": {"runId": first["runId"], "message": f"{KEYWORD_ANSWER_NOW} and now?"}},
        )
        assert approved["accepted"], approved
        assert approved["contract"]["backendSessionId"] == first["children"][0]["backendSessionId"]
        resumed = await result_of(server, "resume", {"token": approved["token"], "mode": "task"})
        child = resumed["children"][0]
        assert resumed["status"] == "completed" and child["attempt"] == 2, resumed
        assert child["backendSessionId"] == first["children"][0]["backendSessionId"]
        await server.finish()
    # The resumed turn sent the earlier conversation again.
    last = mock.requests[-1].raw_body
    assert "PINEAPPLE42" in last and "and now?" in last


async def test_stop_in_the_middle_of_a_pi_tool_leaves_nothing(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        await stop_in_the_middle_of_a_tool(server, SPAWN, "bash")
        await server.finish()
    # running_server proved that no process carrying the run's marker survived.


async def test_an_unreachable_model_ends_failed(tmp_path: Path) -> None:
    with MockLLM() as gone:
        base_url = gone.openai_base_url
    env = pi_environment(tmp_path, base_url, retries=False)
    async with running_server(*server_args(tmp_path), env=env) as server:
        run = await result_of(server, "spawn", {**SPAWN, "prompt": "hello", "mode": "task"})
        assert run["status"] == "failed", run
        assert run["children"][0]["error"]["code"] == "agent-error"
        await server.finish()


async def test_the_pi_version_is_probed_reported_in_receipts_and_listed_by_ping(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        checked = await result_of(server, "preflight", {**SPAWN, "prompt": "hi"})
        version = checked["receipts"]["access"]["children"][0]["version"]
        assert version == "0.73.1"  # agents/package.json pins it
        pong = await result_of(server, "ping", {})
        assert {"id": "pi", "available": True, "version": version} in pong["backends"]
        await server.finish()


async def test_an_empty_pi_prompt_is_refused_and_one_filled_with_nothing_never_starts_pi(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        refused = await error_of(server, "spawn", {**SPAWN, "prompt": " \n"})
        assert refused["code"] == -32003
        assert [(d["code"], d["path"]) for d in refused["data"]["diagnostics"]] == [
            ("empty-prompt", "prompt")
        ]
        checked = await result_of(
            server, "preflight", {**SPAWN, "tasks": [{"prompt": "hi"}, {"prompt": ""}]}
        )
        assert checked["accepted"] is False and "preflightId" not in checked
        assert [(d["code"], d["path"]) for d in checked["diagnostics"]] == [
            ("empty-prompt", "tasks[1].prompt")
        ]
        # The first step prints only whitespace: pi's prompt fills to nothing.
        workflow = {
            "name": "hollow",
            "task": "t",
            "chain": [
                {"command": ["printf", "  \\n"], "backend": "command"},
                {**SPAWN, "prompt": "{previous}"},
            ],
        }
        run = await result_of(server, "spawn", {"workflow": workflow, "mode": "task"})
        assert run["status"] == "failed", run
        child = run["children"][1]
        assert (child["status"], child["error"]["code"]) == ("failed", "empty-prompt")
        assert "pid" not in child and "startedAt" not in child
        await server.finish()
    assert mock.requests == []  # pi never ran: no model was asked anything


async def test_an_empty_follow_up_to_a_pi_child_is_refused_by_preflight(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        run = await result_of(server, "spawn", {**SPAWN, "prompt": "look around", "mode": "task"})
        assert run["status"] == "completed", run
        refused = await result_of(
            server, "preflight", {"resume": {"runId": run["runId"], "message": " \t"}}
        )
        assert refused["accepted"] is False and "token" not in refused
        assert [(d["code"], d["path"]) for d in refused["diagnostics"]] == [
            ("empty-prompt", "resume.message")
        ]
        await server.finish()


async def test_a_read_only_pi_launch_cannot_write_a_file(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with MockLLM(tool_command=WRITE_ATTEMPT) as mock:
        env = pi_environment(tmp_path, mock.openai_base_url)
        async with running_server(*server_args(tmp_path), env=env) as server:
            receipt = await read_only_cannot_write(server, SPAWN, work)
            await server.finish()
        offered: Any = mock.requests[-1].body_object()["tools"]
    # bash was taken away (it can write), and the receipt says so and why.
    assert [tool["function"]["name"] for tool in offered] == ["read"]
    assert [tool["name"] for tool in receipt["tools"]] == ["read"]
    assert receipt["removedTools"][0]["name"] == "bash"
    assert "filesystem-write" in receipt["removedTools"][0]["exceeds"]
    assert receipt["effects"] == ["filesystem-read"]


async def test_a_lean_pi_child_loads_no_context_file_and_a_full_one_does(
    tmp_path: Path, mock: MockLLM
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        shown = await lean_loads_no_context_file(server, SPAWN, work, mock)
        await server.finish()
    assert shown["sessionResources"] == "lean" and "--no-context-files" in shown["argv"]
