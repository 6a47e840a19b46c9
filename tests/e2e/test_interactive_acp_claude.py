"""claude-agent-acp (pinned, scripts/install-agents; it runs the Claude Code its Agent
SDK ships) as an ACP agent, started with the launch a configured backend would have
(`CLAUDE_AGENT_ACP`, `claude_agent_acp_env`: the mock as the Anthropic API) and driven
only through `AcpConversation`. Nothing leaves 127.0.0.1; no process of a test
survives it."""

from __future__ import annotations

import asyncio
import contextlib
from functools import partial
from pathlib import Path
from typing import Final, Unpack

import psutil

from subagent_host.backends.events import ToolEnded, ToolKind, ToolStarted
from subagent_host.backends.interactive.base import Delivery, OptionKind
from tests.backends.fixtures.driven import WAIT_S, Watched
from tests.backends.fixtures.record_acp import (
    WRITE_COMMAND,
    WRITTEN,
    AgentOptions,
    DrivenAgent,
    a_message_then_closing_stdin,
    a_second_agent_loads_the_session,
    wait_for_sleep,
    watched_agent,
)
from tests.backends.fixtures.record_claude import claude_env
from tests.e2e.agents import AGENT_BIN, needs_cli
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_SLEEP_TOOL, MockLLM

pytestmark = needs_cli("claude-agent-acp")

CLAUDE_AGENT_ACP: Final = AGENT_BIN / "claude-agent-acp"
SLEEP_COMMAND: Final = "timeout 60 sleep 30"
"""Claude Code's Bash tool refuses a standalone `sleep` (or one followed by more)."""
EDITS: Final = "acceptEdits"
"""A mode that runs the mock's `printf x > written.txt` in the cwd without asking."""


def claude_agent_acp_env(tmp_path: Path, base_url: str) -> dict[str, str]:
    """The launch's environment: a scratch HOME and config directory, the mock as the
    Anthropic API with a dummy key, no traffic of Claude Code's own (`claude_env`), and
    no prompt suggestions (a model request of their own after each turn)."""
    home, config = tmp_path / "home", tmp_path / "claude-config"
    home.mkdir(exist_ok=True)
    config.mkdir(exist_ok=True)
    return {**claude_env(base_url, home, config), "CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION": "false"}


def claude_agent_acp(
    tmp_path: Path, mock: MockLLM, prompt: str, **options: Unpack[AgentOptions]
) -> contextlib.AbstractAsyncContextManager[Watched[DrivenAgent]]:
    """claude-agent-acp in `tmp_path`/work, against `mock`."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = claude_agent_acp_env(tmp_path, mock.base_url)
    return watched_agent((str(CLAUDE_AGENT_ACP),), env, work, prompt=prompt, **options)


async def test_a_tool_turn_then_a_message_then_closing_stdin_ends_claude_agent_acp(
    tmp_path: Path,
) -> None:
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with claude_agent_acp(tmp_path, mock, "list the files", mode=EDITS) as watched:
            child = watched.child
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert child.acp.agent_info is not None
            assert child.acp.agent_info["name"] == "@agentclientprotocol/claude-agent-acp"
            [started] = [r for r in child.reactions if isinstance(r, ToolStarted)]
            # Its tool_call is titled "Terminal"; the command comes in an update after.
            assert started.kind is ToolKind.EXECUTE and started.summary == "Terminal"
            [ended] = [r for r in child.reactions if isinstance(r, ToolEnded)]
            assert not ended.is_error
            assert (tmp_path / "work" / WRITTEN).exists()
            assert watched.text_since(0).startswith("MOCK-FINAL: scenario=after-tool")
            await a_message_then_closing_stdin(watched)


async def test_the_hosts_approvals_put_it_in_default_where_it_asks_and_the_answer_decides(
    tmp_path: Path,
) -> None:
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        prompt = "write it please"
        async with claude_agent_acp(tmp_path, mock, prompt, ask_before_tools=True) as watched:
            child = watched.child
            written = tmp_path / "work" / WRITTEN
            asked = await child.permission()
            # It starts in `auto`; the conversation asked for its asking mode.
            assert child.acp.asking_mode() == "default" and child.acp.current_mode == "default"
            assert asked.kind is ToolKind.EXECUTE and asked.summary == WRITE_COMMAND
            kinds = {option.kind: option.option_id for option in asked.options}
            assert kinds[OptionKind.ALLOW_ONCE] == "allow-once"
            assert kinds[OptionKind.REJECT_ONCE] == "reject"
            await child.carry_out(child.conversation.answer(asked.permission_id, "allow-once"))
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert written.exists()
            written.unlink()
            await child.send("m1", "write again", Delivery.QUEUE)
            asked = await child.permission()
            await child.carry_out(child.conversation.answer(asked.permission_id, "reject"))
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert not written.exists()
            assert await child.close() == 0


async def test_an_interrupt_mid_tool_ends_the_turn_and_the_command(tmp_path: Path) -> None:
    with MockLLM(sleep_command=SLEEP_COMMAND) as mock:
        prompt = f"{KEYWORD_SLEEP_TOOL} please"
        async with claude_agent_acp(tmp_path, mock, prompt, ask_before_tools=True) as watched:
            child = watched.child
            asked = await child.permission()  # in `default` it asks before any command
            await child.carry_out(child.conversation.answer(asked.permission_id, "allow-once"))
            sleep = await wait_for_sleep(child)
            watched.look()
            await child.carry_out(child.conversation.interrupt())
            assert (await child.turn_ended()).stop_reason == "interrupted"
            assert [r.is_error for r in child.reactions if isinstance(r, ToolEnded)] == [True]
            # Claude Code ends the command it was running when its turn is cancelled.
            _, alive = await asyncio.to_thread(psutil.wait_procs, [sleep], timeout=WAIT_S)
            assert alive == []
            await child.send("m1", f"{KEYWORD_ANSWER_NOW} after")
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert await child.close() == 0


async def test_a_second_claude_agent_acp_loads_the_session_and_continues_it(
    tmp_path: Path,
) -> None:
    with MockLLM() as mock:
        await a_second_agent_loads_the_session(
            partial(claude_agent_acp, tmp_path, mock), mode=EDITS
        )
