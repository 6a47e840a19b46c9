"""The real codex CLI (pinned, scripts/install-agents) as an interactive child: its
`app-server` started with the interactive launch and driven only through
`CodexAppConversation` (each line it prints fed to it, each write it says done),
against the loopback mock LLM. Nothing leaves 127.0.0.1; no process of a test
survives it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import psutil

from subagent_host.backends.events import ToolStarted
from subagent_host.backends.interactive.base import (
    Delivery,
    MessageDelivered,
    TurnEnded,
    TurnEndedLeavingCommands,
)
from tests.backends.fixtures.driven import WAIT_S, Watched, watching
from tests.backends.fixtures.record_codex import API_KEY_VARIABLE
from tests.backends.fixtures.record_codex_app import (
    SHORT_SLEEP,
    WRITE_COMMAND,
    WRITTEN,
    DrivenChild,
    wait_for_sleep,
)
from tests.e2e.agents import codex_environment, needs_cli
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_REPEAT, KEYWORD_SLEEP_TOOL, MockLLM

pytestmark = needs_cli("codex")

FIRST_PROMPT: Final = "list the files please"


@contextlib.asynccontextmanager
async def codex_child(
    tmp_path: Path, mock: MockLLM, prompt: str, *, ask: bool = False
) -> AsyncIterator[Watched[DrivenChild]]:
    env = {**codex_environment(tmp_path, mock.openai_base_url), API_KEY_VARIABLE: "dummy"}
    work = tmp_path / "work"
    work.mkdir()
    async with watching(await DrivenChild.launch(env, str(work), ask=ask, prompt=prompt)) as w:
        yield w


async def test_a_turn_then_a_follow_up_then_closing_stdin_ends_codex(tmp_path: Path) -> None:
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with codex_child(tmp_path, mock, FIRST_PROMPT) as watched:
            child = watched.child
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert child.conversation.session_id is not None
            assert watched.text_since(0).startswith("MOCK-FINAL")
            start = len(child.reactions)
            follow_up = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}papaya"
            assert await child.send("m1", follow_up) == "delivered"
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert watched.text_since(start).endswith(" papaya")  # the model got it
            watched.look()
            assert await child.close() == 0
        assert any("papaya" in request.raw_body for request in mock.requests)


async def test_a_queued_message_waits_for_the_turn_and_a_steered_one_joins_it(
    tmp_path: Path,
) -> None:
    with MockLLM(tool_command=WRITE_COMMAND, sleep_command=SHORT_SLEEP) as mock:
        async with codex_child(tmp_path, mock, f"{KEYWORD_SLEEP_TOOL} please") as watched:
            child = watched.child
            await wait_for_sleep(child)  # the turn runs its tool
            watched.look()
            queued = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}mango"
            assert await child.send("q1", queued) == "queued"
            assert child.conversation.queued() == ["q1"]
            steered = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}kiwi"
            assert await child.send("s1", steered, Delivery.STEER) == "delivered"
            start = len(child.reactions)
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert watched.text_since(start).endswith(" kiwi")  # steered into that turn
            await child.until(lambda r: r == MessageDelivered("q1"))
            assert child.conversation.queued() == []
            start = len(child.reactions)
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert watched.text_since(start).endswith(" mango")
            assert await child.close() == 0


async def test_an_interrupt_ends_the_turn_not_codex_and_leaves_the_command_to_supervision(
    tmp_path: Path,
) -> None:
    with MockLLM() as mock:
        async with codex_child(tmp_path, mock, f"{KEYWORD_SLEEP_TOOL} please") as watched:
            child = watched.child
            sleep = await wait_for_sleep(child)
            # codex ends a command interrupted in its first moments itself; one it has
            # announced (it then runs on its own) it leaves running.
            started = await child.next(ToolStarted)
            assert isinstance(started, ToolStarted) and started.summary is not None
            assert started.summary.endswith("'sleep 300'")
            watched.look()
            await child.carry_out(child.conversation.interrupt())
            ended = await child.turn_ended()
            assert ended.stop_reason == "interrupted"
            assert isinstance(ended, TurnEndedLeavingCommands)
            assert [left.tool_id for left in ended.left_running] == [started.tool_id]
            # codex left its command running, in codex's tree: there the supervision
            # finds it, and ends it by its pid.
            assert sleep.is_running()
            assert sleep.pid in {process.pid for process in child.descendants()}
            sleep.kill()
            psutil.wait_procs([sleep], timeout=WAIT_S)
            start = len(child.reactions)
            after = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}cherry"
            assert await child.send("m1", after) == "delivered"
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert watched.text_since(start).endswith(" cherry")
            assert await child.close() == 0


async def test_a_write_allowed_happens_and_one_rejected_does_not(tmp_path: Path) -> None:
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with codex_child(tmp_path, mock, "write it please", ask=True) as watched:
            child, written = watched.child, tmp_path / "work" / WRITTEN
            asked = await child.permission()
            assert (asked.name, asked.summary) == ("shell", f"/bin/bash -lc '{WRITE_COMMAND}'")
            assert not written.exists()  # it waits for the answer
            await child.carry_out(child.conversation.answer(asked.permission_id, "accept"))
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert written.exists()
            written.unlink()
            assert await child.send("m1", "write it again") == "delivered"
            asked = await child.permission()
            await child.carry_out(child.conversation.answer(asked.permission_id, "decline"))
            ended = await child.turn_ended()
            assert ended == TurnEnded("end_turn")  # declined: the turn goes on to its end
            assert not written.exists()
            watched.look()
            assert await child.close() == 0
