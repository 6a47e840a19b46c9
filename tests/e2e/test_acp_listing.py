"""Configured ACP agents through a real server: `ping`, `initialize` and `agents/list`
list each with what it answered to `initialize` (or why it cannot run), a preflight
reports its version, a launch of one that cannot answer is `backend-unavailable` with the
probe's reason, a resume of one that does not declare `loadSession` is refused
`resume-unsupported`. `running_server` proves the server leaves no process behind."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Final

from tests.backends.conftest import assert_gone
from tests.backends.fixtures.record_acp import qwen_args
from tests.backends.fixtures.tiny_acp import tiny_agent
from tests.e2e.agents import agent_path, needs_cli
from tests.e2e.harness import error_of, result_of, running_server, state_args

QWEN: Final = needs_cli("qwen")  # e2e, skipped when it is not installed
PROBES_S: Final = 60.0  # the most the probes may take, all together, on a loaded machine
TINY: Final = {
    "id": "tiny",
    "available": True,
    "version": "0.0.1",
    "protocol": "acp",
    "protocolVersion": 1,
    "agentInfo": {"name": "tiny", "title": "Tiny", "version": "0.0.1"},
    "agentCapabilities": {
        "loadSession": False,
        "promptCapabilities": {"image": True, "audio": False, "embeddedContext": False},
    },
    "authMethods": [],
}


def configured(
    tmp_path: Path, **backends: dict[str, Any]
) -> tuple[tuple[str, ...], dict[str, str]]:
    """Server arguments naming `backends` in a `--config` file, and its environment."""
    config = tmp_path / "subagents.json"
    config.write_text(json.dumps({"backends": backends}))
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": agent_path(), "HOME": str(home)}
    return (*state_args(tmp_path / "state"), "--config", str(config)), env


def acp(executable: str, args: list[str]) -> dict[str, Any]:
    return {"protocol": "acp", "executable": executable, "args": args}


async def settled(server: Any) -> dict[str, dict[str, Any]]:
    """`ping`'s ACP backends by id, once none is still being asked (no event tells it)."""
    async with asyncio.timeout(PROBES_S):
        while True:
            ping = await result_of(server, "ping", {})
            listed = {b["id"]: b for b in ping["backends"] if b.get("protocol") == "acp"}
            if not any(b["available"] and "protocolVersion" not in b for b in listed.values()):
                return listed
            await asyncio.sleep(0.05)


async def test_ping_initialize_and_agents_list_list_each_acp_agent_as_it_answered(
    tmp_path: Path,
) -> None:
    executable, answers = tiny_agent(tmp_path, "answers")
    _, exits = tiny_agent(tmp_path, "exits")
    _, text = tiny_agent(tmp_path, "text")
    args, env = configured(
        tmp_path,
        tiny=acp(executable, answers),
        broken=acp(executable, exits),
        chatty=acp(executable, text),
        gone=acp("no-such-acp-agent-here", []),
    )
    async with running_server(*args, env=env) as server:
        listed = await settled(server)
        assert listed["tiny"] == TINY
        assert listed["broken"] == {
            "id": "broken",
            "available": False,
            "protocol": "acp",
            "reason": "it exited (status 3) before answering initialize; "
            "its stderr ended: tiny: no model configured",
        }
        assert listed["chatty"]["reason"] == (
            "it printed a line that is not a JSON object: Welcome to tiny, the agent!"
        )
        assert listed["gone"] == {
            "id": "gone",
            "available": False,
            "protocol": "acp",
            "reason": "'no-such-acp-agent-here' is not on the server's PATH",
        }
        initialized = await result_of(server, "initialize", {})
        backends = initialized["capabilities"]["backends"]
        assert [b for b in backends if b.get("protocol") == "acp"] == list(listed.values())
        assert {b["id"] for b in backends} >= {"command", "pi", "claude", "codex"}
        agents = await result_of(server, "agents/list", {})
        assert agents["backends"] == list(listed.values())
        await server.finish()


async def test_agents_list_has_no_backends_without_acp_agents(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        assert "backends" not in await result_of(server, "agents/list", {})
        await server.finish()


async def test_preflight_shows_the_version_refuses_an_agent_that_cannot_answer_and_resume(
    tmp_path: Path,
) -> None:
    executable, answers = tiny_agent(tmp_path, "answers")
    _, exits = tiny_agent(tmp_path, "exits")
    args, env = configured(tmp_path, tiny=acp(executable, answers), broken=acp(executable, exits))
    work = tmp_path / "work"
    work.mkdir()
    async with running_server(*args, env=env) as server:
        launch = {"backend": "tiny", "prompt": "hello", "cwd": str(work)}
        checked = await result_of(server, "preflight", launch)
        assert checked["accepted"] is True, checked
        assert checked["receipts"]["access"]["children"][0]["version"] == "0.0.1"

        broken = {**launch, "backend": "broken"}
        refused = await result_of(server, "preflight", broken)
        assert refused["accepted"] is False
        [diagnostic] = [d for d in refused["diagnostics"] if d["severity"] == "error"]
        assert diagnostic["code"] == "backend-unavailable"
        assert diagnostic["message"] == (
            "the broken backend cannot run: it exited (status 3) before answering initialize; "
            "its stderr ended: tiny: no model configured"
        )
        error = await error_of(server, "spawn", {**broken, "mode": "task"})
        assert error["code"] == -32002
        assert error["message"] == diagnostic["message"]

        run = await result_of(server, "spawn", {**launch, "mode": "task"})
        assert run["status"] == "completed", run
        assert run["children"][0]["output"]["text"] == "tiny says hello"
        resume = {"resume": {"runId": run["runId"], "message": "and again"}}
        not_resumed = await result_of(server, "preflight", resume)
        assert not_resumed["accepted"] is False
        [why] = not_resumed["diagnostics"]
        assert why["code"] == "resume-unsupported"
        assert why["message"].startswith(
            "the ACP agent 'tiny' does not declare loadSession: it cannot continue a session; "
        )
        await server.finish()


@QWEN[0]
@QWEN[1]
async def test_qwen_is_listed_with_its_agent_info_and_load_session(tmp_path: Path) -> None:
    args, env = configured(tmp_path, qwen=acp("qwen", list(qwen_args("http://127.0.0.1:9/v1"))))
    async with running_server(*args, env=env) as server:
        qwen = (await settled(server))["qwen"]
        assert qwen["available"] is True
        assert qwen["version"] == "0.24.4"
        assert qwen["testedVersion"] == "0.24.4"  # the version of qwen-code the tests run
        assert qwen["agentInfo"] == {"name": "qwen-code", "title": "Qwen Code", "version": "0.24.4"}
        assert qwen["agentCapabilities"]["loadSession"] is True
        assert qwen["authMethods"] == ["openai"]
        await server.finish()


async def test_a_server_that_exits_mid_probe_ends_the_agent_and_its_children(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "grandchild"
    executable, silent = tiny_agent(tmp_path, "silent", str(pidfile))
    args, env = configured(tmp_path, silent=acp(executable, silent))
    async with running_server(*args, env=env) as server:
        async with asyncio.timeout(PROBES_S):  # the agent's child says it started
            while not (pidfile.exists() and pidfile.read_text()):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        grandchild = int(pidfile.read_text())
        [listed] = [
            b for b in (await result_of(server, "ping", {}))["backends"] if b["id"] == "silent"
        ]
        assert listed == {"id": "silent", "available": True, "protocol": "acp"}  # still asked
        code, _ = await server.finish()  # within the probe's 15 s
        assert code == 0
    await assert_gone([grandchild])
