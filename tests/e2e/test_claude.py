"""The real Claude Code CLI (pinned, scripts/install-agents) run through the server,
against the loopback mock LLM, in what only claude is tested for: a read-only launch
(the shapes all three CLIs share are in test_agent_clis.py). Nothing leaves 127.0.0.1:
the CLI gets the mock as ANTHROPIC_BASE_URL and every switch that turns its other
traffic off."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from tests.e2e.agents import (
    CLAUDE_SPAWN,
    WRITE_ATTEMPT,
    claude_environment,
    needs_cli,
    read_only_cannot_write,
    server_args,
)
from tests.e2e.harness import running_server
from tests.mock_llm import MockLLM

pytestmark = needs_cli("claude")


SPAWN: Final = CLAUDE_SPAWN


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
