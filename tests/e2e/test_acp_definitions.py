"""An agent definition that names a configured ACP agent as its `backend` (protocol.md §18,
§24.1), through a real server: `spawn {agent}` runs it on that agent, its body leading the
first prompt; `agents/list` shows the backend; a definition naming `command` is refused,
and one naming a backend no file configured is refused at launch."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Final

from tests.e2e.agents import agent_path, server_args
from tests.e2e.harness import error_of, result_of, running_server
from tests.e2e.test_agent_definitions import config_home, define, user_dir

TEST_AGENT: Final = ("-m", "subagent_host.conformance.acp_agent")
BODY: Final = "You are the WARDEN-9Z agent: keep it short."


async def test_a_definition_naming_an_acp_backend_runs_on_it_with_its_body_first(
    tmp_path: Path,
) -> None:
    state = tmp_path / "agent-state"
    backend = {
        "protocol": "acp",
        "executable": sys.executable,
        "args": [*TEST_AGENT, "--state", str(state)],
    }
    config = tmp_path / "subagents.json"
    config.write_text(json.dumps({"backends": {"acp-test": backend}}))
    agents = user_dir(tmp_path) / "agents"
    define(agents, "warden", "guards the gate", BODY, backend="acp-test")
    define(agents, "stray", "names no configured agent", "Stray.", backend="gemini")
    define(agents, "shell", "names a backend that runs no agent", "Shell.", backend="command")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": agent_path(), "HOME": str(home), "XDG_CONFIG_HOME": str(config_home(tmp_path))}
    work = tmp_path / "work"
    work.mkdir()
    args = (*server_args(tmp_path), "--config", str(config))
    async with running_server(*args, env=env) as server:
        listed = await result_of(server, "agents/list", {})
        by_name = {agent["name"]: agent for agent in listed["agents"]}
        assert by_name["warden"]["backend"] == "acp-test"
        assert by_name["stray"]["backend"] == "gemini"
        assert "shell" not in by_name
        [invalid] = [d for d in listed["diagnostics"] if d["code"] == "invalid-backend"]
        assert invalid["path"].endswith("shell.md")
        assert "not command, which runs no agent" in invalid["message"]

        spawn = {"agent": "warden", "prompt": "report", "mode": "task", "cwd": str(work)}
        run = await result_of(server, "spawn", spawn)
        assert run["status"] == "completed", run
        [child] = run["children"]
        assert child["backend"] == "acp-test"
        # The test agent echoes its prompt's text blocks: the body's block, then the prompt's.
        assert child["output"]["text"].startswith(f"echo: {BODY}report"), child["output"]

        error = await error_of(server, "spawn", {**spawn, "agent": "stray"})
        assert error["code"] == -32002
        [refused] = error["data"]["diagnostics"]
        assert (refused["code"], refused["path"]) == ("backend-unavailable", "backend")
        assert "backend 'gemini' is not known to this server" in refused["message"]
        await server.finish()
