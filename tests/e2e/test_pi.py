"""The real pi CLI (pinned, scripts/install-agents) run through the server, against the
loopback mock LLM, in what only pi is tested for: its probed version, empty prompts and
follow-ups, and a read-only launch (the shapes all three CLIs share are in
test_agent_clis.py). Nothing leaves 127.0.0.1 (pi runs with PI_OFFLINE, no version
check and no telemetry)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from tests.e2e.agents import (
    PI_SPAWN,
    WRITE_ATTEMPT,
    needs_cli,
    pi_environment,
    read_only_cannot_write,
    server_args,
)
from tests.e2e.harness import error_of, result_of, running_server
from tests.e2e.test_worktrees import assert_no_worktree_left, make_repository, remove_kept
from tests.mock_llm import MockLLM

pytestmark = needs_cli("pi")


SPAWN: Final = PI_SPAWN


async def test_the_pi_version_is_probed_reported_in_receipts_and_listed_by_ping(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        checked = await result_of(server, "preflight", {**SPAWN, "prompt": "hi"})
        version = checked["receipts"]["access"]["children"][0]["version"]
        assert version == "0.73.1"  # agents/package.json pins it
        pong = await result_of(server, "ping", {})
        entry = {"id": "pi", "available": True, "version": version, "testedVersion": version}
        assert entry in pong["backends"]
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


async def test_parallel_isolated_pi_children_each_write_in_their_own_worktree(
    tmp_path: Path,
) -> None:
    repo = make_repository(tmp_path / "repo")
    state = tmp_path / "state"
    with MockLLM(tool_command='echo "$(basename "$PWD")" >> shared.txt') as mock:
        env = pi_environment(tmp_path, mock.openai_base_url)
        async with running_server(*server_args(tmp_path), env=env) as server:
            run = await result_of(
                server,
                "spawn",
                {
                    **SPAWN,
                    "tasks": [{"prompt": "append your name"}, {"prompt": "append yours"}],
                    "isolation": "worktree",
                    "cwd": str(repo),
                    "mode": "task",
                },
            )
            assert run["status"] == "completed", run
            await server.finish()
    spaces = [child["workspace"] for child in run["children"]]
    for space in spaces:  # each wrote its own worktree's name into its own copy
        assert (space["uncommitted"], space["changedFiles"], space["kept"]) == (
            1,
            ["shared.txt"],
            True,
        ), space
        name = Path(space["path"]).name
        assert (Path(space["path"]) / "shared.txt").read_text() == f"base\n{name}\n"
    assert (repo / "shared.txt").read_text() == "base\n"  # the shared checkout is untouched
    remove_kept(repo)
    assert_no_worktree_left(repo, state)


async def test_pi_without_an_api_key_fails_saying_so_not_where_its_docs_are(
    tmp_path: Path, mock: MockLLM
) -> None:
    # pi prints why first, then how to log in and the paths of its docs: the message
    # takes the reason (a key for anthropic is in neither the environment nor auth.json).
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        spawn = {**SPAWN, "model": "anthropic/claude-sonnet-4-5", "prompt": "hi", "mode": "task"}
        run = await result_of(server, "spawn", spawn)
        assert run["status"] == "failed", run
        error = run["children"][0]["error"]
        assert error["code"] == "exit-status", error
        assert error["message"] == "pi exited with status 1: No API key found for anthropic.", error
        assert "docs/models.md" in error["data"]["stderrTail"]
        await server.finish()
    assert mock.requests == []
