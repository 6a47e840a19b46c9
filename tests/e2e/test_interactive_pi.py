"""The real pi CLI (pinned, scripts/install-agents) in rpc mode, against the loopback mock
LLM, driven only through `PiRpcConversation`: what it says is written to pi's stdin, every
line pi prints is fed to it (`PiRpc`, tests/backends/fixtures/record_pi_rpc.py). The mock
ends its final text with each word after `REPEAT:` in the latest user message: a word
in an answer proves the model got that message. Every pi started here carries a marker
in its environment; no process carrying it survives a test."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import psutil

from subagent_host.backends.interactive.base import (
    Delivery,
    DeliveryState,
    MessageDelivered,
    TurnEnded,
    TurnStarted,
)
from tests.backends.fixtures.driven import WAIT_S
from tests.backends.fixtures.record_pi_rpc import (
    PiRpc,
    follow_up,
    interrupt,
    pi_item,
    queue_and_steer,
    turn_ended,
)
from tests.backends.test_pi_rpc import final_texts, turns
from tests.e2e.agents import needs_cli, pi_environment, wait_for_sleep
from tests.e2e.harness import assert_no_run_survives, marked_processes
from tests.mock_llm import KEYWORD_ANSWER_NOW, MockLLM

pytestmark = needs_cli("pi")

MARKER: Final = "SUBAGENT_HOST_RUN_ID"
"""The variable the process checks look for (tests/e2e/harness.py `marked_processes`)."""


@asynccontextmanager
async def started_pi(tmp_path: Path, mock: MockLLM) -> AsyncIterator[PiRpc]:
    """pi in rpc mode on the mock, in `tmp_path/work`; ended with its group (by its pid)
    after the test, which fails if a process carrying its marker is still alive."""
    marker = marker_of(tmp_path)
    env = {**pi_environment(tmp_path, mock.openai_base_url, retries=False), MARKER: marker}
    work = tmp_path / "work"
    work.mkdir()
    pi = await PiRpc.launch(pi_item(str(work), {}), tmp_path / "sessions", env)
    try:
        yield pi
    finally:
        pi.kill()
        await asyncio.wait_for(pi.process.wait(), WAIT_S)
        gone = await asyncio.to_thread(marked_processes, {marker})
        await asyncio.to_thread(psutil.wait_procs, gone, WAIT_S)
        assert_no_run_survives({marker})


def marker_of(tmp_path: Path) -> str:
    """The marker of the pi a test starts (and of every process pi starts)."""
    return f"pi-rpc-{os.getpid()}-{tmp_path.name}"


def answers(pi: PiRpc) -> list[str]:
    return final_texts(pi.reactions)


async def test_the_first_turn_ends_a_follow_up_is_answered_and_closing_stdin_ends_pi(
    tmp_path: Path, mock: MockLLM
) -> None:
    async with started_pi(tmp_path, mock) as pi:
        await follow_up(pi)
        assert turns(pi.reactions) == [
            TurnStarted(),
            TurnEnded("end_turn"),
            TurnStarted(),
            TurnEnded("end_turn"),
        ]
        first, second = answers(pi)
        assert first.endswith(" one") and second.endswith(" two")
        assert pi.conversation.session_id  # what a resume would continue
        assert await pi.close() == 0


async def test_a_steer_reaches_the_running_turn_and_a_queued_message_is_its_own_turn(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release"
    os.mkfifo(release)  # the tool waits on it: the test says when the tool ends
    with MockLLM(sleep_command=f"cat {release}") as mock:
        async with started_pi(tmp_path, mock) as pi:
            await queue_and_steer(pi, release)
            assert turns(pi.reactions) == [
                TurnStarted(),
                TurnEnded("end_turn"),
                MessageDelivered("q1"),
                TurnStarted(),
                TurnEnded("end_turn"),
            ]
            *_, steered, queued = answers(pi)
            assert steered.endswith(" steered") and queued.endswith(" queued")
            assert pi.conversation.queued() == []
            assert await pi.close() == 0


async def test_an_interrupt_mid_tool_ends_its_process_and_the_turn_and_the_next_is_answered(
    tmp_path: Path, mock: MockLLM
) -> None:
    async with started_pi(tmp_path, mock) as pi:
        tools: list[psutil.Process] = []

        async def tool_runs() -> None:
            await wait_for_sleep(marker_of(tmp_path))
            found = await asyncio.to_thread(marked_processes, {marker_of(tmp_path)})
            tools.extend(p for p in found if p.pid != pi.process.pid)  # bash, sleep

        await interrupt(pi, tool_runs)
        assert tools, "the tool's processes were seen running"
        _, alive = await asyncio.to_thread(psutil.wait_procs, tools, WAIT_S)
        assert alive == [], "the interrupt ended the tool's processes"
        assert turns(pi.reactions) == [
            TurnStarted(),
            TurnEnded("interrupted"),
            MessageDelivered("q1"),
            TurnStarted(),
            TurnEnded("end_turn"),
        ]
        assert answers(pi)[-1].endswith(" queued")
        # A message sent once no turn runs starts one at once, and is answered.
        state = await pi.send("m3", f"{KEYWORD_ANSWER_NOW} REPEAT:after", Delivery.QUEUE)
        assert state is DeliveryState.DELIVERED
        assert await pi.until(turn_ended) == TurnEnded("end_turn")
        assert answers(pi)[-1].endswith(" after")
        assert await pi.close() == 0
