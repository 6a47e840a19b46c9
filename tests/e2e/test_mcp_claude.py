"""The real pinned `claude` CLI as the MCP client of `subagent-host mcp` (protocol.md §22):
an agent delegates to other CLIs through this server, offline against the mock LLM."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Final

import psutil

from subagent_host.client import Host
from tests.e2e.agents import AGENT_BIN, claude_environment, needs_cli, pi_environment
from tests.e2e.harness import EXIT_TIMEOUT_S, assert_no_run_survives, server_executable
from tests.e2e.mcp_client import POLL_INTERVAL_S
from tests.mock_llm import (
    DELEGATED_AGENT_PROMPT,
    DELEGATED_COMMAND_TEXT,
    FINAL_TEXT_PREFIX,
    KEYWORD_DELEGATE_MCP,
    MockLLM,
)

pytestmark = [*needs_cli("claude"), *needs_cli("pi")]

SESSION: Final = "claude-mcp"
CLAUDE_TIMEOUT_S: Final = 180.0  # two delegated runs and three model turns, with room
CONNECT_TIMEOUT_MS: Final = 60_000


async def test_claude_code_delegates_a_command_and_a_pi_agent_through_subagent_host_mcp(
    tmp_path: Path, mock: MockLLM
) -> None:
    (tmp_path / "pi").mkdir()
    env = {
        **pi_environment(tmp_path / "pi", mock.base_url),
        **claude_environment(tmp_path, mock.base_url),
        # Headless Claude Code connects MCP servers in the background and may ask the
        # model before the face is there (its tools are then missing from the first
        # turn): told to wait for the connection, with room for a loaded machine, as
        # README "Use from an MCP client" says.
        "MCP_CONNECTION_NONBLOCKING": "false",
        "MCP_CONNECT_TIMEOUT_MS": str(CONNECT_TIMEOUT_MS),
    }
    state = tmp_path / "state"
    config = tmp_path / "mcp.json"
    face = ["mcp", "--state-dir", str(state), "--session", SESSION]
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "subagent-host": {"command": server_executable(), "args": face, "env": env}
                }
            }
        )
    )
    claude = await asyncio.create_subprocess_exec(
        str(AGENT_BIN / "claude"),
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        "mock-model",
        "--mcp-config",
        str(config),
        "--strict-mcp-config",
        "--allowedTools",
        "mcp__subagent-host__spawn",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    prompt = f"{KEYWORD_DELEGATE_MCP} run a command, then a pi agent, through subagent-host"
    out, err = await asyncio.wait_for(claude.communicate(prompt.encode()), CLAUDE_TIMEOUT_S)
    assert claude.returncode == 0, err.decode()[-2000:]
    events = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    [result] = [event for event in events if event.get("type") == "result"]
    assert result["is_error"] is False and result["result"].startswith(FINAL_TEXT_PREFIX)

    # What the model was told by the two spawn calls: the command's output, then pi's answer.
    tool_results = _tool_results(events)
    assert len(tool_results) == 2, tool_results
    assert DELEGATED_COMMAND_TEXT in tool_results[0] and "completed" in tool_results[0]
    assert "completed" in tool_results[1] and FINAL_TEXT_PREFIX in tool_results[1]
    # The pi agent really ran, on the mock, with the delegated prompt.
    assert mock.requests_containing(DELEGATED_AGENT_PROMPT)

    # Both runs were recorded by the face's server, in its session, and went through it.
    async with Host.start(["--state-dir", str(state), "--session", SESSION]) as host:
        runs = (await host.status()).runs
        snapshots = [await host.status(run.run_id) for run in runs]
    assert [(s.children[0].backend, s.status) for s in reversed(snapshots)] == [
        ("command", "completed"),
        ("pi", "completed"),
    ]
    # Claude has exited and closed the face's stdin: the face, its server and the runs are gone.
    await _no_process_uses(state)
    assert_no_run_survives({snapshot.run_id for snapshot in snapshots})


def _tool_results(events: list[dict[str, Any]]) -> list[str]:
    """The text of each tool result Claude Code put in the conversation, in order."""
    texts = []
    for event in events:
        if event.get("type") != "user":
            continue
        for block in event["message"]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                content = block["content"]
                texts.append(
                    content
                    if isinstance(content, str)
                    else "".join(part.get("text", "") for part in content)
                )
    return texts


async def _no_process_uses(state: Path) -> None:
    """No process names the state directory on its command line (the face, its server)."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:  # the process table changes without telling anyone: poll it, bounded
            if not await asyncio.to_thread(_users_of, str(state)):
                return
            await asyncio.sleep(POLL_INTERVAL_S)


def _users_of(state: str) -> list[int]:
    found = []
    for process in psutil.process_iter():
        try:
            if state in process.cmdline() and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found
