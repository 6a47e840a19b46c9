"""A mixed `tasks` run with real processes: its `task`-mode answer is due once the members it
waits for have ended, while its background members go on; the run then ends once, and its
terminal `status` event carries its final output (protocol.md §8.5, §11)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from subagent_host.planning.plan import ChildPlan, RunPlan
from subagent_host.planning.prepare import launch_plan
from subagent_host.runs.state import TERMINAL, Run, RunEvent, RunStatus
from subagent_host.values import RunKind
from subagent_host.values.events import StatusEvent
from subagent_host.values.facts import OutputInfo
from tests.gates import gate_at, gated_line
from tests.runs.test_orchestrator import CAPS, WAIT_S, Harness, command


def gated(gate: Path) -> ChildPlan:
    """A child that ends only once a line arrives on the FIFO `gate` (then prints it)."""
    return command("sh", "-c", gated_line(gate))


def launch_mixed(runs: Harness, *children: ChildPlan, background: tuple[int, ...]) -> Run:
    plan = launch_plan(RunPlan(kind=RunKind.PARALLEL, children=children), runs.backends)
    run = runs.orchestrator.launch(plan, "s1", mode="task", background=background)
    runs.runs.append(run)
    return run


def terminal_events(events: list[RunEvent]) -> list[RunEvent]:
    return [
        e for e in events if isinstance(e.payload, StatusEvent) and e.payload.status in TERMINAL
    ]


def output_of(event: RunEvent) -> OutputInfo | None:
    assert isinstance(event.payload, StatusEvent)
    return event.payload.output


async def test_the_answer_is_due_when_the_task_members_end_and_the_background_ones_go_on(
    runs: Harness, tmp_path: Path
) -> None:
    with gate_at(tmp_path / "gate") as gate:
        run = launch_mixed(
            runs, command("echo", "quick"), gated(tmp_path / "gate"), background=(1,)
        )
        await asyncio.wait_for(runs.orchestrator.wait_for_reply(run), WAIT_S)

        waited, loose = run.children
        assert waited.status is RunStatus.COMPLETED, waited
        assert loose.status in (RunStatus.QUEUED, RunStatus.RUNNING), loose
        assert not run.is_terminal and terminal_events(runs.events_of(run)) == []
        answered_at = run.last_seq

        os.write(gate, b"go\n")
        await runs.finish(run)
    assert run.status is RunStatus.COMPLETED
    assert loose.output is not None and loose.output.text == "released go\n"
    (ended,) = terminal_events(runs.events_of(run))  # exactly once, after the answer
    assert ended.seq > answered_at
    assert run.output is not None and output_of(ended) == run.output
    assert "[0] completed\nquick" in run.output.text and "released go" in run.output.text
    # A resume of either member without a mode of its own takes the member's.
    assert (run.member_mode(0), run.member_mode(1)) == ("task", "background")


async def test_a_background_member_that_ends_first_leaves_the_answer_to_the_others(
    runs: Harness, tmp_path: Path
) -> None:
    with gate_at(tmp_path / "gate") as gate:
        run = launch_mixed(runs, gated(tmp_path / "gate"), command("true"), background=(1,))
        await runs.until(lambda: run.children[1].status in TERMINAL)
        reply = asyncio.ensure_future(runs.orchestrator.wait_for_reply(run))
        await runs.until(lambda: run.children[0].status is RunStatus.RUNNING)
        assert not reply.done()  # its task member still runs

        os.write(gate, b"now\n")
        await asyncio.wait_for(reply, WAIT_S)
        assert run.status is RunStatus.COMPLETED  # nothing left running: the answer is its end
        await runs.finish(run)
    assert run.status is RunStatus.COMPLETED


async def test_detaching_a_mixed_run_answers_at_once_and_every_member_goes_on(
    runs: Harness, tmp_path: Path
) -> None:
    with gate_at(tmp_path / "first") as first, gate_at(tmp_path / "second") as second:
        run = launch_mixed(
            runs, gated(tmp_path / "first"), gated(tmp_path / "second"), background=(1,)
        )
        await runs.until(lambda: all(c.status is RunStatus.RUNNING for c in run.children))
        assert runs.orchestrator.detach(run)
        await asyncio.wait_for(runs.orchestrator.wait_for_reply(run), WAIT_S)
        assert [c.status for c in run.children] == [RunStatus.RUNNING, RunStatus.RUNNING]

        os.write(first, b"1\n")
        os.write(second, b"2\n")
        await runs.finish(run)
    assert run.status is RunStatus.COMPLETED
    assert len(terminal_events(runs.events_of(run))) == 1


async def test_stopping_a_mixed_run_after_its_answer_ends_its_background_members(
    runs: Harness, tmp_path: Path
) -> None:
    with gate_at(tmp_path / "gate"):
        run = launch_mixed(runs, command("true"), gated(tmp_path / "gate"), background=(1,))
        await asyncio.wait_for(runs.orchestrator.wait_for_reply(run), WAIT_S)
        await runs.until(lambda: run.children[1].status is RunStatus.RUNNING)
        await runs.orchestrator.stop(run, grace_ms=1000, reason="enough")
        await runs.finish(run)
    assert run.status is RunStatus.CANCELLED
    (ended,) = terminal_events(runs.events_of(run))
    assert run.output is not None and output_of(ended) == run.output
    assert run.output.partial is True


async def test_the_terminal_status_event_carries_the_capped_output_of_each_kind(
    runs: Harness,
) -> None:
    """Single and chain: the last child's text, capped at 48 KiB; tasks: the summary of each
    child's text capped at 12 KiB; the same value the run's snapshot shows."""
    # Words, not one long run of letters, which redaction would take for base64.
    big = ("sh", "-c", "yes 'lorem ipsum' | head -c 100000")
    single = runs.launch(command(*big))
    chain = runs.launch(command("echo", "first"), command(*big), kind=RunKind.CHAIN)
    tasks = runs.launch(command(*big), command(*big), kind=RunKind.PARALLEL)
    for run, cap in ((single, CAPS.bytes), (chain, CAPS.bytes), (tasks, 2 * CAPS.parallel_bytes)):
        await runs.finish(run)
        (ended,) = terminal_events(runs.events_of(run))
        assert run.output is not None and output_of(ended) == run.output
        output = run.output
        assert output.truncated is True and output.partial is False, output
        assert len(output.text.encode()) < cap + 200, len(output.text)
        assert output.text.count("[output truncated]") == len(run.children) - (
            run.kind is RunKind.CHAIN
        )


async def test_an_empty_output_is_carried_and_a_run_without_output_carries_none(
    runs: Harness,
) -> None:
    empty = runs.launch(command("true"))
    await runs.finish(empty)
    (ended,) = terminal_events(runs.events_of(empty))
    output = output_of(ended)
    assert output is not None and output.text == "" and output.bytes == 0

    never = runs.launch(command("true"))
    runs.orchestrator.begin_stop(never, grace_ms=None, reason="before it started")
    await runs.finish(never)
    assert never.status is RunStatus.CANCELLED and never.output is None
    (ended,) = terminal_events(runs.events_of(never))
    assert output_of(ended) is None
