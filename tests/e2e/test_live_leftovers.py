"""Nothing of an interactive child outlives its server: pi, Claude Code and codex, each
interactive and in the middle of a long tool, on a server that is SIGKILLed. Its
guardian ends them all (protocol.md §13), the CLIs and their tools; `running_server`
then proves no process carrying one of their runs' markers is left. (A close, a stop
and an idle timeout are proved in each CLI's own tests: test_live_*.py.)"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import psutil

from tests.e2e.agents import (
    CLAUDE_SPAWN,
    CODEX_SPAWN,
    PI_SPAWN,
    claude_environment,
    codex_environment,
    needs_cli,
    pi_environment,
    server_args,
)
from tests.e2e.harness import EXIT_TIMEOUT_S, marked_processes, running_server
from tests.e2e.live import LiveClient, gone, tool_process
from tests.mock_llm import KEYWORD_SLEEP_TOOL, MockLLM

pytestmark = [*needs_cli("pi"), *needs_cli("claude"), *needs_cli("codex")]


def every_cli_environment(tmp_path: Path, mock: MockLLM) -> dict[str, str]:
    """One server environment in which each CLI talks to the mock from its own directory."""
    places = {name: tmp_path / name for name in ("pi", "claude", "codex")}
    for place in places.values():
        place.mkdir()
    return {
        **pi_environment(places["pi"], mock.openai_base_url, retries=False),
        **claude_environment(places["claude"], mock.base_url),
        **codex_environment(places["codex"], mock.openai_base_url),
    }


async def test_a_sigkilled_servers_guardian_ends_its_interactive_children_mid_tool(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = every_cli_environment(tmp_path, mock)
    async with running_server(*server_args(tmp_path), env=env) as server:
        client = LiveClient(server)
        trees: list[psutil.Process] = []
        for spawn in (PI_SPAWN, CLAUDE_SPAWN, CODEX_SPAWN):
            params = {**spawn, "prompt": f"{KEYWORD_SLEEP_TOOL} please", "interactive": True}
            run_id = (await client.result("spawn", params))["runId"]
            await tool_process(run_id, "sleep")
            trees += await asyncio.to_thread(marked_processes, {run_id})
        server.signal(signal.SIGKILL)
        assert await asyncio.wait_for(server.proc.wait(), EXIT_TIMEOUT_S) == -signal.SIGKILL
        ended = await asyncio.gather(*(gone(process) for process in trees))
        assert all(ended), [p for p, e in zip(trees, ended, strict=True) if not e]
