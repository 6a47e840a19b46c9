"""Talking to an interactive child through `Host`: `send`, `interrupt`, `close_run`,
`permit` and `answer_permissions` against the real server, with a real command child
that answers each line (protocol.md §23). The `started` fixture proves that the server
and every process of its runs are gone after each test."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Final

import pytest

from subagent_host.client import (
    Delivery,
    DeliveryState,
    Host,
    InvalidParams,
    OptionKind,
    PendingPermission,
    PermissionOption,
    RequestRefused,
    RunStatus,
    SendResult,
    ToolKind,
    TurnEvent,
    TurnInfo,
    TurnState,
)
from subagent_host.client.permissions import option_id_of
from subagent_host.values.choices import Phase
from tests.backends.fixtures.record_claude_stream import WRITE_COMMAND, WRITTEN
from tests.client.conftest import started
from tests.e2e.agents import AGENT_BIN, claude_environment
from tests.mock_llm import MockLLM
from tests.runs.test_live_children import LINES

# Answers each line with `got <line>`, but `quiet` lines; survives SIGINT (a REPL's Ctrl-C).
CHILD: Final = (sys.executable, "-u", "-c", LINES)


async def turn_ends(
    host: Host, run_id: str, since: int, phase: Phase = Phase.END
) -> tuple[int, str | None]:
    """The seq and stop reason of the first `turn` event of `phase` after `since`."""
    async for event in host.events(run_id, since=since):
        if isinstance(event.event, TurnEvent) and event.event.phase is phase:
            return event.seq, event.event.stop_reason
    raise AssertionError(f"the run ended before its turn's {phase}")


async def test_messages_are_delivered_or_queued_and_a_close_ends_the_run_completed(
    tmp_path: Path, framing: str
) -> None:
    async with started(tmp_path, framing) as (host, _):
        run = await host.spawn(command=CHILD, prompt="quiet", interactive=True, stream=True)
        await turn_ends(host, run.run_id, 0, Phase.START)  # its first turn runs: quiet
        running = await host.status(run.run_id)
        assert running.children[0].turn == TurnInfo(count=1, state=TurnState.RUNNING)
        queued = await host.send(run.run_id, "later")
        assert queued == SendResult(message_id=queued.message_id, state=DeliveryState.QUEUED)
        steered = await host.send(run.run_id[:8], "now", index=0, delivery=Delivery.STEER)
        assert steered.state is DeliveryState.DELIVERED and steered.message_id.startswith("msg-")
        seq, reason = await turn_ends(host, run.run_id, 0)
        assert reason == "end_turn"  # `got now`: the queued message starts the next turn
        await turn_ends(host, run.run_id, seq)
        waiting = await host.status(run.run_id)
        assert waiting.children[0].turn == TurnInfo(count=2, state=TurnState.WAITING)
        closed = await host.close_run(run.run_id)
        assert closed.status is RunStatus.COMPLETED
        assert closed.children[0].output is not None
        assert closed.children[0].output.text == "got now\ngot later\n"
        again = await host.close_run(run.run_id)  # closing what ended is a no-op
        assert again.status is RunStatus.COMPLETED and again.already_terminal is True


async def test_an_interrupt_ends_the_turn_and_says_when_none_ran(tmp_path: Path) -> None:
    async with started(tmp_path) as (host, _):
        run = await host.spawn(command=CHILD, prompt="hello", interactive=True, stream=True)
        seq, _ = await turn_ends(host, run.run_id, 0)
        idle = await host.interrupt(run.run_id)
        assert not idle.interrupted and idle.turn == TurnInfo(count=1, state=TurnState.WAITING)
        assert (await host.send(run.run_id, "quiet")).state is DeliveryState.DELIVERED
        stopped = await host.interrupt(run.run_id, index=0)
        assert stopped.interrupted and stopped.turn == TurnInfo(2, TurnState.RUNNING)
        seq, reason = await turn_ends(host, run.run_id, seq)
        assert reason == "interrupted"
        # The child lived on: it answers the next message.
        assert (await host.send(run.run_id, "still here")).state is DeliveryState.DELIVERED
        await turn_ends(host, run.run_id, seq)
        closed = await host.close_run(run.run_id, index=0)
        assert closed.status is RunStatus.COMPLETED
        assert closed.children[0].output is not None
        assert closed.children[0].output.text == "got hello\ngot still here\n"


async def test_refusals_raise_request_refused_with_the_reason(tmp_path: Path) -> None:
    async with started(tmp_path) as (host, _):
        plain = await host.spawn(command=("sleep", "30"))
        with pytest.raises(RequestRefused) as refused:
            await host.send(plain.run_id, "hi")
        assert refused.value.code == -32003
        assert refused.value.data["reason"] == "not-interactive"
        assert refused.value.data["runId"] == plain.run_id
        with pytest.raises(RequestRefused, match="no interactive child"):
            await host.interrupt(plain.run_id)
        with pytest.raises(RequestRefused) as refused:
            await host.close_run(plain.run_id, index=0)
        assert refused.value.data["reason"] == "not-interactive"
        await host.stop(run_id=plain.run_id, grace_ms=0)

        run = await host.spawn(command=CHILD, prompt="hello", interactive=True)
        await turn_ends(host, run.run_id, 0)
        with pytest.raises(RequestRefused) as refused:
            await host.permit(run.run_id, "0.nothing", "allow-once")
        assert refused.value.data == {
            "reason": "not-pending",
            "runId": run.run_id,
            "permissionId": "0.nothing",
        }
        with pytest.raises(InvalidParams):
            await host.send(run.run_id, "")
        with pytest.raises(InvalidParams, match="delivery"):
            await host.send(run.run_id, "hi", delivery="sideways")
        await host.close_run(run.run_id)
        with pytest.raises(RequestRefused) as refused:
            await host.send(run.run_id, "too late")
        assert refused.value.data["reason"] == "not-running"


async def test_answering_permissions_ends_with_the_run_having_answered_none_asked(
    tmp_path: Path,
) -> None:
    """A command child never asks: the helper follows the run to its end, calls nothing
    and answers nothing; on a run already over it returns at once."""
    asked: list[PendingPermission] = []
    async with started(tmp_path) as (host, _):
        run = await host.spawn(command=CHILD, prompt="hello", interactive=True)
        await turn_ends(host, run.run_id, 0)
        closing = await host.close_run(run.run_id)
        assert await host.answer_permissions(run.run_id, asked.append) == []
        assert closing.status is RunStatus.COMPLETED and asked == []


@pytest.mark.skipif(not (AGENT_BIN / "claude").exists(), reason="claude is not installed")
async def test_a_callback_answers_each_permission_claude_asks_until_the_run_ends(
    tmp_path: Path,
) -> None:
    """The real Claude Code CLI against the loopback mock LLM, whose model asks its shell
    to write a file: the callback (a coroutine function) allows it, and the file is
    written."""
    work = tmp_path / "work"
    work.mkdir()
    asked: list[PendingPermission] = []

    async def allow(permission: PendingPermission) -> OptionKind:
        asked.append(permission)
        return OptionKind.ALLOW_ONCE

    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        env = claude_environment(tmp_path, mock.base_url)
        async with started(tmp_path, env=env) as (host, _):
            run = await host.spawn(
                backend="claude",
                model="mock-model",
                tools=("Bash", "Read"),
                prompt="write it please",
                cwd=str(work),
                interactive=True,
                approvals="client",
            )
            answering = asyncio.create_task(host.answer_permissions(run.run_id, allow))
            _, reason = await turn_ends(host, run.run_id, 0)
            assert reason == "end_turn" and (work / WRITTEN).exists()
            closed = await host.close_run(run.run_id)
            assert closed.status is RunStatus.COMPLETED, closed.error
            async with asyncio.timeout(30):
                answers = await answering  # the run ended: so does the helper
    assert [p.summary for p in asked] == [WRITE_COMMAND]
    assert asked[0].name == "Bash" and asked[0].kind is ToolKind.EXECUTE
    assert [(a.permission_id, a.kind) for a in answers] == [
        (asked[0].permission_id, OptionKind.ALLOW_ONCE)
    ]


PERMISSION: Final = PendingPermission(
    index=0,
    permission_id="0.p1",
    name="Bash",
    kind=ToolKind.EXECUTE,
    summary="printf x > written.txt",
    options=(
        PermissionOption("accept", "Allow", OptionKind.ALLOW_ONCE),
        PermissionOption("decline", "Reject", OptionKind.REJECT_ONCE),
        PermissionOption("cancel", "Reject and end the turn", OptionKind.REJECT_ONCE),
    ),
)


@pytest.mark.parametrize(
    ("choice", "option_id"),
    [
        (OptionKind.ALLOW_ONCE, "accept"),
        (OptionKind.REJECT_ONCE, "decline"),  # the first of that kind
        (PERMISSION.options[2], "cancel"),
        ("cancel", "cancel"),
        (None, None),
    ],
)
def test_a_decision_names_the_option_to_send(
    choice: OptionKind | PermissionOption | str | None, option_id: str | None
) -> None:
    assert option_id_of(PERMISSION, choice) == option_id


def test_a_kind_the_permission_does_not_offer_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="offers no allow-always"):
        option_id_of(PERMISSION, OptionKind.ALLOW_ALWAYS)
