"""Qwen Code (pinned, scripts/install-agents) as an ACP agent: `qwen --acp` started
with the ACP launch and driven only through `AcpConversation` (each line it prints fed
to it, each write it says done), against the loopback mock LLM's chat completions.
Nothing leaves 127.0.0.1; no process of a test survives it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import psutil

from subagent_host.backends.events import ToolEnded, ToolKind, ToolStarted
from subagent_host.backends.interactive.base import Delivery, DeliveryState, MessageDelivered
from tests.backends.fixtures.driven import WAIT_S, Watched
from tests.backends.fixtures.record_acp import (
    QWEN,
    SLEEP_COMMAND,
    WRITE_COMMAND,
    WRITTEN,
    DrivenAgent,
    a_message_then_closing_stdin,
    qwen_args,
    qwen_env,
    wait_for_sleep,
    watched_agent,
)
from tests.e2e.agents import needs_cli
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_REPEAT, KEYWORD_SLEEP_TOOL, MockLLM

pytestmark = needs_cli("qwen")

FIRST_PROMPT: Final = "list the files please"


@contextlib.asynccontextmanager
async def qwen_child(
    tmp_path: Path, mock: MockLLM, prompt: str, *, mode: str = "yolo"
) -> AsyncIterator[Watched[DrivenAgent]]:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    argv = (str(QWEN), *qwen_args(mock.openai_base_url))
    async with watched_agent(argv, qwen_env(home), work, prompt=prompt, mode=mode) as watched:
        yield watched


async def test_a_tool_turn_then_a_message_then_closing_stdin_ends_qwen(tmp_path: Path) -> None:
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with qwen_child(tmp_path, mock, FIRST_PROMPT) as watched:
            child = watched.child
            assert (await child.turn_ended()).stop_reason == "end_turn"
            [started] = [r for r in child.reactions if isinstance(r, ToolStarted)]
            assert started.kind is ToolKind.EXECUTE and started.name == "run_shell_command"
            assert (tmp_path / "work" / WRITTEN).exists()
            assert watched.text_since(0).startswith("MOCK-FINAL: scenario=after-tool")
            await a_message_then_closing_stdin(watched)


async def test_an_interrupt_mid_tool_ends_the_turn_and_the_command(tmp_path: Path) -> None:
    with MockLLM(sleep_command=SLEEP_COMMAND) as mock:
        prompt = f"{KEYWORD_SLEEP_TOOL} please"
        async with qwen_child(tmp_path, mock, prompt) as watched:
            child = watched.child
            sleep = await wait_for_sleep(child)
            watched.look()
            await child.next(ToolStarted)
            queued = await child.send("m1", f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}after")
            assert queued is DeliveryState.QUEUED
            await child.carry_out(child.conversation.interrupt())
            assert (await child.turn_ended()).stop_reason == "interrupted"
            assert [r.is_error for r in child.reactions if isinstance(r, ToolEnded)] == [True]
            # qwen ends the command it was running when its turn is cancelled.
            _, alive = await asyncio.to_thread(psutil.wait_procs, [sleep], timeout=WAIT_S)
            assert alive == []
            await child.next(MessageDelivered)
            start = len(child.reactions)
            await child.turn_ended()
            assert watched.text_since(start).endswith(" after")
            assert await child.close() == 0


async def test_in_its_default_mode_qwen_asks_and_the_answer_decides(tmp_path: Path) -> None:
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with qwen_child(tmp_path, mock, "write it please", mode="default") as watched:
            child = watched.child
            written = tmp_path / "work" / WRITTEN
            asked = await child.permission()
            assert asked.kind is ToolKind.EXECUTE and asked.summary == WRITE_COMMAND
            await child.carry_out(child.conversation.answer(asked.permission_id, "proceed_once"))
            await child.turn_ended()
            assert written.exists()
            written.unlink()
            await child.send("m1", "write again", Delivery.QUEUE)
            asked = await child.permission()
            await child.carry_out(child.conversation.answer(asked.permission_id, "cancel"))
            await child.turn_ended()
            assert not written.exists()
            assert await child.close() == 0


async def test_a_second_qwen_loads_the_session_and_continues_it(tmp_path: Path) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    with MockLLM() as mock:
        remember = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}remembered"
        first = Watched(
            await DrivenAgent.launch(mock.openai_base_url, home, str(work), prompt=remember)
        )
        try:
            first.look()
            await first.child.turn_ended()
            session_id = first.child.conversation.session_id
            assert session_id is not None and await first.child.close() == 0
        finally:
            await first.child.end()
        loaded = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}loaded"
        second = Watched(
            await DrivenAgent.launch(
                mock.openai_base_url, home, str(work), prompt=loaded, resume=session_id
            )
        )
        try:
            second.look()
            await second.child.turn_ended()
            assert second.child.conversation.session_id == session_id
            # Only the new turn's text: the loaded history is not told again; the model
            # was sent the first turn too (its request held more items).
            text = second.text_since(0)
            assert text.endswith(" loaded") and "remembered" not in text
            assert "items=2 " not in text
            assert await second.child.close() == 0
        finally:
            await second.child.end()
    for watched in (first, second):
        _, alive = psutil.wait_procs(list(watched.seen.values()), timeout=WAIT_S)
        assert alive == [], alive
