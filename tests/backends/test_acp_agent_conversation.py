"""The ACP test agent (subagent_host/conformance/acp_agent.py, on the official SDK)
driven only through `AcpConversation`, the way the server drives an ACP child
(tests/backends/fixtures/driven.py: its stdout cut into lines as the server cuts it):
a normal turn, permissions, cancel, load, and each misbehaviour, with the outcome the
conversation documents. No process of a test survives it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Final

import psutil

from subagent_host.backends.events import (
    MessageText,
    PlanUpdated,
    ToolEnded,
    ToolKind,
    ToolStarted,
    UsageSoFar,
)
from subagent_host.backends.interactive.base import (
    OptionKind,
    PermissionAsked,
    ProtocolFailure,
    TurnStarted,
    Write,
)
from subagent_host.conformance.acp_agent import FLOOD_COUNT, HUGE_LINE_BYTES, PLAN
from subagent_host.values.choices import PlanPriority, PlanStatus
from tests.backends.fixtures.driven import WAIT_S, Watched, watching
from tests.backends.fixtures.record_acp import DrivenAgent, wait_for_sleep

AGENT: Final = (sys.executable, "-m", "subagent_host.conformance.acp_agent")


@contextlib.asynccontextmanager
async def agent(
    tmp_path: Path,
    prompt: str,
    *args: str,
    mode: str | None = "yolo",
    resume: str | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> AsyncIterator[Watched[DrivenAgent]]:
    """The test agent playing `args` in tmp_path/work, its sessions in tmp_path/state."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "ACP_TEST_AGENT_STATE": str(tmp_path / "state")}
    env.update(extra_env or {})
    child = await DrivenAgent.launch_agent(
        (*AGENT, *args), env, str(work), prompt=prompt, mode=mode, resume=resume
    )
    async with watching(child) as watched:
        yield watched


async def one_turn(tmp_path: Path, scenario: str) -> DrivenAgent:
    """The agent playing `scenario` for one turn (`hello`) that ends `end_turn`, then
    closed (exit status 0): the test looks back at what it did."""
    async with agent(tmp_path, "hello", scenario) as watched:
        child = watched.child
        assert (await child.turn_ended()).stop_reason == "end_turn"
        assert await child.close() == 0
    return child


def text_of(child: DrivenAgent) -> str:
    return "".join(r.text for r in child.reactions if isinstance(r, MessageText))


async def test_a_turn_gives_its_text_its_tool_with_its_kind_and_its_usage(tmp_path: Path) -> None:
    prompt = "hello there\nplan\nrun: printf hi > out.txt"
    async with agent(tmp_path, prompt) as watched:
        child = watched.child
        assert (await child.turn_ended()).stop_reason == "end_turn"
        assert child.acp.agent_info == {"name": "acp-test-agent", "version": "1.0.0"}
        assert child.acp.load_session and child.acp.current_mode == "yolo"
        [started] = [r for r in child.reactions if isinstance(r, ToolStarted)]
        assert started.kind is ToolKind.EXECUTE and started.summary == "printf hi > out.txt"
        [ended] = [r for r in child.reactions if isinstance(r, ToolEnded)]
        assert ended.tool_id == started.tool_id and not ended.is_error
        assert (tmp_path / "work" / "out.txt").read_text() == "hi"
        # Each plan update is the whole plan: the agent's second marks its first step done.
        plans = [r.entries for r in child.reactions if isinstance(r, PlanUpdated)]
        assert [[entry.status for entry in plan] for plan in plans] == [
            [PlanStatus.PENDING] * 3,
            [PlanStatus.COMPLETED, PlanStatus.PENDING, PlanStatus.PENDING],
        ]
        assert [entry.content for entry in plans[1]] == list(PLAN)
        assert {entry.priority for entry in plans[1]} == {PlanPriority.HIGH}
        assert text_of(child) == f"echo: {prompt}execute: completed\n"
        [usage] = [r for r in child.reactions if isinstance(r, UsageSoFar)]
        # The agent counts words: the prompt's in, its chunks' out.
        assert usage.usage.input_tokens == len(prompt.split()) == 8
        assert usage.usage.output_tokens == len(text_of(child).split()) == 10
        assert await child.close() == 0


async def test_in_its_asking_mode_it_asks_and_the_answer_decides(tmp_path: Path) -> None:
    written = tmp_path / "work" / "a.txt"
    async with agent(tmp_path, "write: a.txt=yes", mode=None) as watched:
        child = watched.child
        asked = await child.permission()
        assert asked.kind is ToolKind.EDIT and asked.summary == "a.txt=yes"
        kinds = {option.option_id: option.kind for option in asked.options}
        assert kinds == {"allow": OptionKind.ALLOW_ONCE, "reject": OptionKind.REJECT_ONCE}
        assert not written.exists()
        await child.carry_out(child.conversation.answer(asked.permission_id, "allow"))
        assert (await child.turn_ended()).stop_reason == "end_turn"
        assert written.read_text() == "yes"
        await child.send("m1", "run: printf no > b.txt")
        asked = await child.permission()
        assert asked.kind is ToolKind.EXECUTE
        await child.carry_out(child.conversation.answer(asked.permission_id, "reject"))
        await child.turn_ended()
        assert not (tmp_path / "work" / "b.txt").exists()
        assert [r.is_error for r in child.reactions if isinstance(r, ToolEnded)] == [False, True]
        assert await child.close() == 0


async def test_an_interrupt_cancels_the_turn_and_ends_its_command(tmp_path: Path) -> None:
    async with agent(tmp_path, "run: sleep 300") as watched:
        child = watched.child
        sleep = await wait_for_sleep(child)
        watched.look()
        await child.next(ToolStarted)
        await child.carry_out(child.conversation.interrupt())
        assert (await child.turn_ended()).stop_reason == "interrupted"
        assert [r.is_error for r in child.reactions if isinstance(r, ToolEnded)] == [True]
        _, alive = await asyncio.to_thread(psutil.wait_procs, [sleep], timeout=WAIT_S)
        assert alive == []
        await child.send("m1", "after")
        assert (await child.turn_ended()).stop_reason == "end_turn"
        assert text_of(child).endswith("echo: after")
        assert await child.close() == 0


async def test_a_second_agent_loads_the_session_without_telling_its_history_again(
    tmp_path: Path,
) -> None:
    async with agent(tmp_path, "remember this") as watched:
        await watched.child.turn_ended()
        session = watched.child.acp.session_id
        assert await watched.child.close() == 0
    assert session is not None
    async with agent(tmp_path, "and this", resume=session) as watched:
        child = watched.child
        await child.turn_ended()
        assert child.acp.session_id == session
        replayed = [line for line in child.lines if b"user_message_chunk" in line]
        assert len(replayed) == 1 and b"remember this" in replayed[0]
        assert text_of(child) == "echo: and this"  # the replay is history, not this turn
        assert await child.close() == 0


async def test_an_agent_that_asks_is_authenticated_from_the_env_then_opens_or_loads(
    tmp_path: Path,
) -> None:
    key = {"ACP_TEST_AGENT_KEY": "k"}
    async with agent(tmp_path, "remember this", "auth", extra_env=key) as watched:
        child = watched.child
        assert (await child.turn_ended()).stop_reason == "end_turn"
        session = child.acp.session_id
        assert await child.close() == 0
    writes = [r.data for r in child.reactions if isinstance(r, Write)]
    sent = [data for data in writes if b'"authenticate"' in data]
    assert len(sent) == 1 and b'"methodId": "test-key"' in sent[0]
    async with agent(tmp_path, "and this", "auth", resume=session, extra_env=key) as watched:
        await watched.child.turn_ended()
        assert text_of(watched.child) == "echo: and this"
        assert await watched.child.close() == 0


async def test_an_agent_that_asks_for_a_variable_the_child_lacks_fails_it(
    tmp_path: Path,
) -> None:
    async with agent(tmp_path, "hello", "auth") as watched:
        failure = await watched.child.next(ProtocolFailure)
        assert failure.reason.startswith("auth-required: ")
        assert "test-key (env_var: ACP_TEST_AGENT_KEY)" in failure.reason
        assert not [r for r in watched.child.reactions if isinstance(r, TurnStarted)]


async def test_an_agent_that_exits_at_once_leaves_only_its_exit(tmp_path: Path) -> None:
    async with agent(tmp_path, "hello", "exit") as watched:
        child = watched.child
        assert await child.close() == 3
        assert not [r for r in child.reactions if not isinstance(r, Write)]
        assert child.acp.session_id is None


async def test_an_unanswered_initialize_waits_for_the_supervision(tmp_path: Path) -> None:
    # The conversation has no clock: bounding the wait is the supervision's (its
    # start timeout); closing stdin ends the agent, nothing having started.
    async with agent(tmp_path, "hello", "silent") as watched:
        child = watched.child
        assert await child.close() == 0
        assert [type(r) for r in child.reactions] == [Write]
        assert child.acp.agent_info is None


async def test_another_protocol_version_is_a_protocol_failure(tmp_path: Path) -> None:
    async with agent(tmp_path, "hello", "wrong-version") as watched:
        failure = await watched.child.next(ProtocolFailure)
        assert failure.reason == "the ACP agent speaks protocol version 2, not 1"
        assert not [r for r in watched.child.reactions if isinstance(r, TurnStarted)]


async def test_a_line_over_the_bound_is_dropped_whole_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    child = await one_turn(tmp_path, "huge-line")
    assert child.dropped_lines == 1
    assert not [line for line in child.lines if len(line) >= HUGE_LINE_BYTES]
    assert text_of(child) == "echo: hello"


async def test_a_flood_of_updates_is_read_to_the_end(tmp_path: Path) -> None:
    child = await one_turn(tmp_path, "flood")
    assert text_of(child) == "w " * FLOOD_COUNT + "echo: hello"


async def test_another_sessions_updates_and_permissions_are_not_this_childs(
    tmp_path: Path,
) -> None:
    child = await one_turn(tmp_path, "other-session")
    assert text_of(child) == "echo: hello"
    assert not [r for r in child.reactions if isinstance(r, ToolStarted | PermissionAsked)]
    refusal = [r for r in child.reactions if isinstance(r, Write) and b"-32601" in r.data]
    assert len(refusal) == 1  # its permission request, answered at once


async def test_a_permission_asked_after_the_turn_is_answered_cancelled(tmp_path: Path) -> None:
    async with agent(tmp_path, "hello", "late-permission") as watched:
        child = watched.child
        await child.turn_ended()
        answer = await child.until(lambda r: isinstance(r, Write) and b'"cancelled"' in r.data)
        assert isinstance(answer, Write) and b'"outcome"' in answer.data
        assert not [r for r in child.reactions if isinstance(r, PermissionAsked)]
        assert await child.close() == 0


async def test_a_line_that_is_not_json_is_a_protocol_failure(tmp_path: Path) -> None:
    async with agent(tmp_path, "hello", "not-json") as watched:
        failure = await watched.child.next(ProtocolFailure)
        assert failure.reason == (
            "the ACP agent printed a line that is not a JSON object: this is not JSON"
        )


async def test_requests_for_files_terminals_and_extensions_are_refused_at_once(
    tmp_path: Path,
) -> None:
    child = await one_turn(tmp_path, "ask-client")
    assert text_of(child) == (
        "fs/read_text_file: error -32601\n"
        "terminal/create: error -32601\n"
        "_test/ask: error -32601\n"
        "echo: hello"
    )
