"""The real codex CLI (pinned, scripts/install-agents) run through the server, against the
loopback mock LLM, in what only codex is tested for: the sandbox an `access` chooses,
and access it cannot honour (the shapes all three CLIs share are in
test_agent_clis.py). Nothing leaves 127.0.0.1 (codex's config turns off update checks,
analytics, plugins, feedback and telemetry)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tests.e2e.agents import CODEX_SPAWN, codex_environment, needs_cli, server_args
from tests.e2e.harness import result_of, running_server
from tests.e2e.test_runs import call
from tests.mock_llm import MockLLM

pytestmark = needs_cli("codex")

SPAWN: Final = CODEX_SPAWN


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
