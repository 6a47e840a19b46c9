"""`agents.enabled` / `agents.disabled`: only enabled agents are listed and delegable,
wherever a request names one (spawn, preflight, tasks, chain, workflow steps, the MCP
face, `subagent-host run`; a resume of a disabled one is refused: see
test_agent_definitions.py); the real server process, its `XDG_CONFIG_HOME` a temporary
directory, pi against the mock LLM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.agents import pi_environment
from tests.e2e.harness import error_of, result_of
from tests.e2e.mcp_client import mcp_server, text_of
from tests.e2e.test_agent_definitions import (
    MOCK_MODEL,
    START,
    agent_server,
    config_home,
    define,
    launched,
    listed,
    plain_environment,
    project,
    project_pi,
    user_dir,
    with_pi,
    write_json,
)
from tests.mock_llm import MockLLM

pytestmark = pytest.mark.e2e

LAUNCH_REJECTED: Final = -32003
EXIT_TIMEOUT_S: Final = 60.0


def agents_everywhere(tmp_path: Path) -> dict[str, Path]:
    """Five user agents, and the lists of protocol.md §19's example: the global file
    enables `rev*` and `scout`, `--config` disables `reviewer-old`, the project `SCOUT`."""
    agents = user_dir(tmp_path) / "agents"
    paths = {
        name: define(agents, name, f"the {name}", "Work.", model=MOCK_MODEL)
        for name in ("reviewer", "Reviewer-2", "reviewer-old", "scout", "writer")
    }
    write_json(user_dir(tmp_path) / "subagents.json", {"agents": {"enabled": ["rev*", "scout"]}})
    write_json(project_pi(tmp_path) / "subagents.json", {"agents": {"disabled": ["SCOUT"]}})
    return paths


def explicit_file(tmp_path: Path) -> Path:
    return write_json(tmp_path / "extra.json", {"agents": {"disabled": ["reviewer-old"]}})


async def test_agents_list_shows_the_enabled_and_with_all_every_agent_saying_why(
    tmp_path: Path,
) -> None:
    paths = agents_everywhere(tmp_path)
    config = explicit_file(tmp_path)
    global_file = str(user_dir(tmp_path) / "subagents.json")
    project_file = str(project(tmp_path) / ".pi" / "subagents.json")
    env = plain_environment(tmp_path)
    async with agent_server(tmp_path, env, "--config", str(config)) as server:
        enabled = await result_of(server, "agents/list", {})
        everything = await result_of(server, "agents/list", {"all": True})
        not_all = await result_of(server, "agents/list", {"all": False})
        await server.finish()

    def entry(name: str, **disabled: str) -> dict[str, Any]:
        item = listed(name, "user", paths[name], f"the {name}", model=MOCK_MODEL)
        return {**item, "disabled": disabled} if disabled else item

    assert enabled["agents"] == [entry("reviewer"), entry("Reviewer-2")]
    assert not_all == enabled
    assert everything["agents"] == [
        entry("reviewer"),
        entry("Reviewer-2"),
        entry("reviewer-old", by="agents.disabled", pattern="reviewer-old", file=str(config)),
        entry("scout", by="agents.disabled", pattern="SCOUT", file=project_file),
        entry("writer", by="agents.enabled", file=global_file),
    ]
    assert everything["diagnostics"] == enabled["diagnostics"] == []


# A request naming `reviewer` in each place a request can; the path of its diagnostic.
NAMING: Final[dict[str, tuple[dict[str, Any], str]]] = {
    "single": ({"agent": "reviewer", "prompt": START}, "agent"),
    "tasks": ({"tasks": [{"agent": "scout", "prompt": START},
                         {"agent": "Reviewer", "prompt": START}]}, "tasks[1].agent"),
    "chain": ({"chain": [{"agent": "REVIEWER", "prompt": START}]}, "chain[0].agent"),
    "workflow step": ({"workflow": {"name": "w", "task": "t", "chain": [
        {"agent": "scout", "prompt": START}, {"agent": "reviewer", "prompt": "{previous}"}]}},
        "workflow.chain[1].agent"),
    "parallel step": ({"workflow": {"name": "w", "task": "t", "chain": [
        {"parallel": [{"agent": "reviewer", "prompt": START}]}]}},
        "workflow.chain[0].parallel[0].agent"),
    "forEach item": ({"workflow": {"name": "w", "task": "t", "chain": [
        {"command": ["echo", "[1]"], "as": "xs"},
        {"forEach": "{outputs.xs}", "item": {"agent": "reviewer", "prompt": "{item}"}}]}},
        "workflow.chain[1].item.agent"),
}  # fmt: skip


@with_pi
async def test_a_disabled_agent_is_refused_wherever_a_request_names_it_and_nothing_starts(
    tmp_path: Path, mock: MockLLM
) -> None:
    """`reviewer` matches the enabled `*` and the disabled `rev*`: disabled wins. `scout`
    is enabled and runs."""
    for name in ("reviewer", "scout"):
        define(user_dir(tmp_path) / "agents", name, name, "Work.", model=MOCK_MODEL)
    global_file = user_dir(tmp_path) / "subagents.json"
    write_json(global_file, {"agents": {"enabled": ["*"], "disabled": ["rev*"]}})
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with agent_server(tmp_path, env) as server:
        for shape, (params, path) in NAMING.items():
            error = await error_of(server, "spawn", params)
            assert error["code"] == LAUNCH_REJECTED, (shape, error)
            problems = [(d["code"], d.get("path")) for d in error["data"]["diagnostics"]]
            assert problems == [("agent-disabled", path)], (shape, error)
            checked = await result_of(server, "preflight", params)
            assert checked["accepted"] is False, (shape, checked)
            assert [(d["code"], d.get("path")) for d in checked["diagnostics"]] == problems
        [diagnostic] = error["data"]["diagnostics"]
        assert diagnostic["message"] == (
            f"the agent 'reviewer' is disabled by agents.disabled pattern 'rev*' of "
            f"{global_file} (see agents/list with all: true)"
        )
        assert (await result_of(server, "status", {}))["runs"] == []  # nothing started
        run = await launched(server, "scout")  # the enabled one runs
        assert run["children"][0]["backend"] == "pi"
        await server.finish()


async def test_the_mcp_face_lists_and_refuses_as_the_protocol_does(tmp_path: Path) -> None:
    define(user_dir(tmp_path) / "agents", "reviewer", "reviews", "Work.")
    define(user_dir(tmp_path) / "agents", "scout", "scouts", "Work.")
    config = write_json(tmp_path / "extra.json", {"agents": {"disabled": ["Rev*"]}})
    env = {"XDG_CONFIG_HOME": str(config_home(tmp_path))}
    async with mcp_server(tmp_path, "--config", str(config), env=env) as server:
        enabled = await server.ok("agents_list", {})
        assert [agent["name"] for agent in enabled["agents"]] == ["scout"]
        everything = await server.call("agents_list", {"all": True})
        assert (
            f"reviewer (user): reviews [disabled by agents.disabled pattern 'Rev*' of {config}]"
            in (text_of(everything))
        )
        rejected = await server.call("spawn", {"agent": "reviewer", "prompt": "hi"})
        assert rejected.is_error
        assert "error -32003" in text_of(rejected) and "agent-disabled at agent" in text_of(
            rejected
        )
        assert server.run_ids == set()


def test_run_refuses_a_disabled_agent_with_exit_2_and_the_server_s_words(tmp_path: Path) -> None:
    define(user_dir(tmp_path) / "agents", "reviewer", "reviews", "Work.")
    write_json(user_dir(tmp_path) / "subagents.json", {"agents": {"enabled": ["scout"]}})
    done = subprocess.run(  # noqa: TID251 - a one-shot command, no event loop here
        [sys.executable, "-m", "subagent_host", "run", "--state-dir", str(tmp_path / "state"),
         "--agent", "reviewer", "hi"],
        cwd=project(tmp_path),
        env={**os.environ, "XDG_CONFIG_HOME": str(config_home(tmp_path))},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S,
        check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, ""), done
    assert "the agent 'reviewer' is disabled by agents.enabled of " in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
