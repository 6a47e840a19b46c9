"""The real codex CLI (pinned, scripts/install-agents) run through the server, against the
loopback mock LLM: completion, protected resume of its thread, the sandbox an `access`
chooses, stop in the middle of a tool, and an unreachable model (which codex retries for
ever: the run's timeout ends it). Nothing leaves 127.0.0.1 (codex's config turns off
update checks, analytics, plugins, feedback and telemetry)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import psutil

from tests.backends.fixtures.record_codex import API_KEY_VARIABLE, MODEL, codex_config
from tests.e2e.agents import (
    AGENT_BIN,
    lean_loads_no_context_file,
    needs_cli,
    server_args,
    stop_in_the_middle_of_a_tool,
)
from tests.e2e.harness import result_of, running_server
from tests.e2e.test_runs import call
from tests.mock_llm import KEYWORD_ANSWER_NOW, MockLLM

pytestmark = needs_cli("codex")

# The provider's key is not on the codex backend's allowlist: the spawn's env carries it.
SPAWN: Final = {"backend": "codex", "model": MODEL, "env": {API_KEY_VARIABLE: "dummy"}}


def codex_environment(tmp_path: Path, base_url: str) -> dict[str, str]:
    """The server's environment: codex on PATH, its CODEX_HOME pointing at the mock."""
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(codex_config(base_url))
    home = tmp_path / "home"
    home.mkdir()
    return {
        "PATH": f"{AGENT_BIN}:{psutil.Process().environ().get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
    }


async def test_a_codex_run_completes_with_the_mocks_answer_usage_and_a_thread(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = codex_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        run = await result_of(server, "spawn", {**SPAWN, "prompt": "look around", "mode": "task"})
        child = run["children"][0]
        assert run["status"] == "completed", run
        assert child["output"]["text"].startswith("MOCK-FINAL: scenario=after-tool")
        assert child["usage"]["inputTokens"] > 0 and child["usage"]["outputTokens"] > 0
        assert "costUsd" not in child["usage"] or child["usage"]["costUsd"] is None
        assert child["backendSessionId"]
        await server.finish()
    assert mock.requests and all(r.path == "/v1/responses" for r in mock.requests)
    assert all(r.headers.get("authorization") == "Bearer dummy" for r in mock.requests)


async def test_a_resumed_codex_child_continues_its_thread(tmp_path: Path, mock: MockLLM) -> None:
    env = codex_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        first = await result_of(
            server, "spawn", {**SPAWN, "prompt": "remember PINEAPPLE42", "mode": "task"}
        )
        thread = first["children"][0]["backendSessionId"]
        approved = await result_of(
            server,
            "preflight",
            {"resume": {"runId": first["runId"], "message": f"{KEYWORD_ANSWER_NOW} and now?"}},
        )
        assert approved["accepted"], approved
        assert approved["contract"]["backendSessionId"] == thread
        resumed = await result_of(server, "resume", {"token": approved["token"], "mode": "task"})
        child = resumed["children"][0]
        assert resumed["status"] == "completed" and child["attempt"] == 2, resumed
        assert child["backendSessionId"] == thread
        await server.finish()
    # The resumed turn sent the earlier conversation again.
    last = mock.requests[-1].raw_body
    assert "PINEAPPLE42" in last and "and now?" in last


async def test_read_access_runs_codex_in_its_read_only_sandbox(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    attempt = "touch written-by-codex; echo touch-exit=$?"
    with MockLLM(tool_command=attempt) as mock:
        env = codex_environment(tmp_path, mock.openai_base_url)
        async with running_server(*server_args(tmp_path), env=env) as server:
            spawn = {
                **SPAWN,
                "prompt": "try to write",
                "cwd": str(work),
                "access": {"filesystem": "read"},
                "mode": "task",
            }
            plan = await result_of(server, "preflight", spawn)
            receipt = plan["receipts"]["access"]["children"][0]
            assert [tool["name"] for tool in receipt["tools"]] == ["read-only"]
            assert receipt["effects"] == ["filesystem-read", "process"]
            assert "read-only" in plan["plan"]["children"][0]["argv"]
            run = await result_of(server, "spawn", spawn)
            assert run["status"] == "completed", run
            first_result = mock.requests[-1].raw_body
            # A resumed attempt keeps the sandbox (its tools are the narrowed ones).
            approved = await result_of(
                server, "preflight", {"resume": {"runId": run["runId"], "message": "again"}}
            )
            resumed = await result_of(
                server, "resume", {"token": approved["token"], "mode": "task"}
            )
            assert resumed["status"] == "completed", resumed
            await server.finish()
        second_result = mock.requests[-1].raw_body
    for tool_result in (first_result, second_result):
        assert "touch-exit=1" in tool_result and "Read-only file system" in tool_result
    assert second_result.count("touch-exit=1") == 2  # the resumed thread: both results
    assert not (work / "written-by-codex").exists()


async def test_access_codex_cannot_honour_is_refused(tmp_path: Path, mock: MockLLM) -> None:
    env = codex_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        reply, _ = await call(
            server, "spawn", {**SPAWN, "prompt": "hi", "access": {"filesystem": "none"}}
        )
        assert "error" in reply, reply
        assert "no-tools-left" in str(reply["error"])
        await server.finish()
    assert mock.requests == []


async def test_stop_in_the_middle_of_a_codex_tool_leaves_nothing(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = codex_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        await stop_in_the_middle_of_a_tool(server, SPAWN, "shell")
        await server.finish()
    # running_server proved that no process carrying the run's marker survived.


async def test_an_unreachable_model_is_ended_by_the_runs_timeout(tmp_path: Path) -> None:
    with MockLLM() as gone:
        base_url = gone.openai_base_url
    env = codex_environment(tmp_path, base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        run = await result_of(
            server, "spawn", {**SPAWN, "prompt": "hello", "timeoutMs": 3000, "mode": "task"}
        )
        assert run["status"] == "timed-out", run
        assert run["children"][0]["backendSessionId"]  # codex had started its thread
        await server.finish()


async def test_a_lean_codex_child_loads_no_context_file_and_a_full_one_does(
    tmp_path: Path, mock: MockLLM
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = codex_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        shown = await lean_loads_no_context_file(server, SPAWN, work, mock)
        await server.finish()
    assert shown["sessionResources"] == "lean" and "project_doc_max_bytes=0" in shown["argv"]
