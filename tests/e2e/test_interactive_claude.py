"""The real Claude Code CLI (pinned, scripts/install-agents) as an interactive child,
driven only through `ClaudeConversation` against the loopback mock LLM: turns,
follow-ups, steered and queued messages, an interrupt mid-tool, tool approvals, and a
clean exit when its stdin closes. Every test ends the CLI's process tree by pid and
proves nothing of it survives.

What the mock can drive: only a shell tool call (Claude Code's `Bash`), never its
`Write` tool, so approvals are asked for a command with a redirect
(`printf x > written.txt`); `echo` and `sleep`, which Claude Code deems safe, never ask.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import psutil
import pytest

from subagent_host.backends.events import ToolStarted
from subagent_host.backends.interactive.base import (
    Approvals,
    Delivery,
    DeliveryState,
    MessageDelivered,
    PermissionAsked,
    PermissionWithdrawn,
    TurnEnded,
    TurnStarted,
)
from tests.backends.fixtures.driven import DrivenProcess
from tests.backends.fixtures.record_claude_stream import (
    WRITE_COMMAND,
    WRITTEN,
    driven_claude,
    sleep_runs_below,
    texts,
)
from tests.e2e.agents import AGENT_BIN, claude_environment, needs_cli
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_SLEEP_TOOL, MockLLM

pytestmark = needs_cli("claude")

CLAUDE: Final = str(AGENT_BIN / "claude")


@asynccontextmanager
async def claude_child(
    tmp_path: Path, mock: MockLLM, approvals: Approvals
) -> AsyncIterator[tuple[DrivenProcess, Path]]:
    """The CLI started interactively in a fresh directory; after the test, its tree is
    ended by pid, and no process may be left there (the CLI and its tools run in it)."""
    work = tmp_path / "work"
    work.mkdir()
    env = claude_environment(tmp_path, mock.base_url)
    try:
        async with driven_claude(work, env, approvals, CLAUDE) as claude:
            yield claude, work
    finally:
        assert await asyncio.to_thread(processes_in, work) == []


def processes_in(directory: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if Path(process.cwd()).is_relative_to(directory) and process.status() != "zombie":
                found.append(process)
        except psutil.Error:
            continue  # gone, or not ours to look at
    return found


async def turn_text(claude: DrivenProcess) -> str:
    """The assistant text until the current turn ends."""
    turn = await claude.through(lambda reaction: isinstance(reaction, TurnEnded))
    assert turn[-1] == TurnEnded("end_turn"), turn[-1]
    return texts(turn)


async def test_a_prompt_then_a_follow_up_are_answered_and_closing_stdin_exits_0(
    tmp_path: Path, mock: MockLLM
) -> None:
    async with claude_child(tmp_path, mock, Approvals.CLI) as (claude, _):
        await claude.carry_out(claude.conversation.opening(f"{KEYWORD_ANSWER_NOW} REPEAT:first"))
        assert (await turn_text(claude)).endswith(" first")
        assert not claude.conversation.turn_running
        reactions, state = claude.conversation.send(
            "m1", f"{KEYWORD_ANSWER_NOW} REPEAT:second", Delivery.QUEUE
        )
        assert state is DeliveryState.DELIVERED
        await claude.carry_out(reactions)
        assert (await turn_text(claude)).endswith(" second")
        assert await claude.close() == 0


async def test_an_interrupt_mid_tool_ends_the_turn_and_its_command_then_a_message_is_answered(
    tmp_path: Path, mock: MockLLM
) -> None:
    async with claude_child(tmp_path, mock, Approvals.CLI) as (claude, _):
        await claude.carry_out(claude.conversation.opening(f"{KEYWORD_SLEEP_TOOL} please"))
        await claude.next(ToolStarted)
        await sleep_runs_below(claude.process.pid)
        await claude.carry_out(claude.conversation.interrupt())
        assert await claude.next(TurnEnded) == TurnEnded("interrupted")
        # Claude Code killed the tool's command: no `sleep` is left below it.
        await sleep_runs_below(claude.process.pid, running=False)
        reactions, _ = claude.conversation.send(
            "m1", f"{KEYWORD_ANSWER_NOW} REPEAT:after", Delivery.QUEUE
        )
        await claude.carry_out(reactions)
        assert (await turn_text(claude)).startswith("MOCK-FINAL:")
        assert mock.requests_containing("REPEAT:after"), "the model got the message"
        assert await claude.close() == 0


async def test_allowed_a_write_happens_and_steered_and_queued_messages_reach_the_model(
    tmp_path: Path,
) -> None:
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with claude_child(tmp_path, mock, Approvals.CLIENT) as (claude, work):
            await claude.carry_out(claude.conversation.opening("write it please"))
            asked = await claude.next(PermissionAsked)
            assert asked.name == "Bash" and asked.summary == WRITE_COMMAND
            assert not (work / WRITTEN).exists()
            steer, state = claude.conversation.send("m1", "REPEAT:steered", Delivery.STEER)
            assert state is DeliveryState.DELIVERED
            await claude.carry_out(steer)
            queue, state = claude.conversation.send(
                "m2", f"{KEYWORD_ANSWER_NOW} REPEAT:queued", Delivery.QUEUE
            )
            assert state is DeliveryState.QUEUED
            await claude.carry_out(queue)
            await claude.carry_out(claude.conversation.answer(asked.permission_id, "allow-once"))
            # The steered message joins the turn: the model's next request carries it
            # (the mock then calls the tool again: rejected this time).
            again = await claude.next(PermissionAsked)
            assert (work / WRITTEN).exists()
            assert mock.requests_containing("REPEAT:steered")
            await claude.carry_out(claude.conversation.answer(again.permission_id, "reject-once"))
            assert await claude.next(TurnEnded) == TurnEnded("end_turn")
            assert not mock.requests_containing("REPEAT:queued")  # held until the turn ended
            assert await claude.next(TurnStarted) == TurnStarted()
            assert await claude.next(MessageDelivered) == MessageDelivered("m2")
            assert (await turn_text(claude)).endswith(" queued")
            assert await claude.close() == 0


async def test_rejected_a_write_does_not_happen_and_the_model_is_told(tmp_path: Path) -> None:
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with claude_child(tmp_path, mock, Approvals.CLIENT) as (claude, work):
            await claude.carry_out(claude.conversation.opening("write it please"))
            asked = await claude.next(PermissionAsked)
            await claude.carry_out(claude.conversation.answer(asked.permission_id, "reject-once"))
            assert (await turn_text(claude)).startswith("MOCK-FINAL: scenario=after-tool")
            assert not (work / WRITTEN).exists()
            assert mock.requests_containing("The user refused this tool use.")
            assert await claude.close() == 0


async def test_an_interrupt_while_asking_withdraws_the_permission(tmp_path: Path) -> None:
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with claude_child(tmp_path, mock, Approvals.CLIENT) as (claude, work):
            await claude.carry_out(claude.conversation.opening("write it please"))
            asked = await claude.next(PermissionAsked)
            await claude.carry_out(claude.conversation.interrupt())
            withdrawn = await claude.next(PermissionWithdrawn)
            assert withdrawn.permission_id == asked.permission_id
            assert await claude.next(TurnEnded) == TurnEnded("interrupted")
            with pytest.raises(KeyError):
                claude.conversation.answer(asked.permission_id, "allow-once")
            assert not (work / WRITTEN).exists()
            # Claude Code's exit says how its last turn ended: interrupted, 1.
            assert await claude.close() == 1
