"""What a run and its children used: a child ended early keeps what its parser reported,
a bug of ours still leaves resources and usage, and a run's usage sums every attempt of
every child (protocol.md §12). Real processes, through the orchestrator."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest

from subagent_host.backends.base import ParsedOutcome
from subagent_host.backends.command import CommandBackend, CommandParser
from subagent_host.backends.exits import ProcessExit
from subagent_host.planning.plan import RunPlan
from subagent_host.planning.prepare import launch_plan
from subagent_host.runs import sampling
from subagent_host.runs.state import RunStatus
from subagent_host.values import RunKind
from subagent_host.values.facts import Usage
from tests.backends.conftest import processes_with_marker
from tests.runs.test_orchestrator import WAIT_S, Harness, command

# Two lines, then a long "tool": the child is ended while it runs.
TWO_LINES_THEN_WAIT = "echo one; echo two; exec sleep 30"


class _UsageSoFarParser(CommandParser):
    """One input token per stdout line so far (an activity per line), and no usage in its
    outcome: an agent CLI ended before its final event, as claude is before its `result`."""

    def __init__(self) -> None:
        super().__init__()
        self.lines = 0
        self._pending: list[str] = []

    def on_stdout(self, data: bytes) -> None:
        super().on_stdout(data)
        said = data.decode().split()
        self.lines += len(said)
        self._pending += [f"said {word}" for word in said]

    def activity(self) -> list[str]:
        pending, self._pending = self._pending, []
        return pending

    @property
    def turns(self) -> int:
        return self.lines

    @property
    def usage(self) -> Usage | None:
        return Usage(self.lines, 1, 0, 0) if self.lines else None


class _UsageSoFarBackend(CommandBackend):
    def parser(self) -> CommandParser:
        return _UsageSoFarParser()


async def test_a_child_stopped_before_its_final_event_keeps_the_usage_its_parser_reported() -> None:
    harness = Harness(backend=_UsageSoFarBackend())
    try:
        run = harness.launch(command("sh", "-c", TWO_LINES_THEN_WAIT))
        await harness.until(lambda: sum(e.type == "activity" for e in harness.events_of(run)) == 2)
        await harness.orchestrator.stop(run, grace_ms=2000, reason="enough")
        child = run.children[0]
        assert (run.status, child.status) == (RunStatus.CANCELLED, RunStatus.CANCELLED)
        assert child.usage == Usage(2, 1, 0, 0) and run.usage == Usage(2, 1, 0, 0)
        assert child.resources is not None and child.resources.processes >= 1
    finally:
        await harness.orchestrator.shutdown("test over")


async def test_a_running_childs_usage_so_far_is_sampled_into_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sampling, "RESOURCE_SAMPLE_S", 0.05)
    swept = asyncio.Event()
    sample = sampling.record_usage

    def record_usage(*args: Any, **kwargs: Any) -> None:
        sample(*args, **kwargs)
        swept.set()  # the sweep goes on to the child's usage in this same step

    monkeypatch.setattr(sampling, "record_usage", record_usage)
    harness = Harness(backend=_UsageSoFarBackend())
    try:
        run = harness.launch(command("sh", "-c", TWO_LINES_THEN_WAIT))
        await harness.until(lambda: sum(e.type == "activity" for e in harness.events_of(run)) == 2)
        async with asyncio.timeout(WAIT_S):
            while run.children[0].usage is None:  # until a sweep after the two lines
                swept.clear()
                await swept.wait()
        assert run.status is RunStatus.RUNNING
        assert run.children[0].usage == Usage(2, 1, 0, 0) and run.usage == Usage(2, 1, 0, 0)
    finally:
        await harness.orchestrator.shutdown("test over")


async def test_a_child_ended_at_its_turn_limit_keeps_the_usage_its_parser_reported() -> None:
    harness = Harness(backend=_UsageSoFarBackend())
    try:
        plan = attrs.evolve(command("sh", "-c", TWO_LINES_THEN_WAIT), max_turns=1)
        run = await harness.finish(harness.launch(plan))
        child = run.children[0]
        assert child.status is RunStatus.LIMIT_REACHED
        assert child.usage == Usage(2, 1, 0, 0) and child.resources is not None
        assert processes_with_marker(run.run_id) == []
    finally:
        await harness.orchestrator.shutdown("test over")


class _PricedParser(CommandParser):
    """Reports `Usage(3, 4, 1, 2, 0.01)` in its outcome, as an agent CLI that completed."""

    def outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        return attrs.evolve(super().outcome(exit_status), usage=PRICED)


PRICED = Usage(3, 4, 1, 2, 0.01)


class _PricedBackend(CommandBackend):
    def parser(self) -> CommandParser:
        return _PricedParser()


async def test_a_runs_usage_sums_its_children_and_each_attempt_a_resume_replaced() -> None:
    harness = Harness(backend=_PricedBackend())
    run = harness.launch(command("echo", "a"), command("echo", "b"), kind=RunKind.PARALLEL)
    run = await harness.finish(run)
    assert run.usage == Usage(6, 8, 2, 4, 0.02)
    again = launch_plan(
        RunPlan(kind=RunKind.SINGLE, children=(command("echo", "b again"),)), harness.backends
    ).children[0]
    harness.orchestrator.resume(run, 1, again)
    await harness.finish(run)
    assert run.children[1].attempt == 2 and run.children[1].usage == PRICED
    assert run.earlier_usage == PRICED  # the attempt the resume replaced
    assert run.usage == Usage(9, 12, 3, 6, 0.03)


class _BrokenTurnsParser(_UsageSoFarParser):
    """A parser with a bug the supervision trips over while the child runs."""

    @property
    def turns(self) -> int:
        raise RuntimeError("a bug")


class _BrokenOutcomeParser(_UsageSoFarParser):
    """A parser with a bug that shows only once the child has exited."""

    def outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        raise RuntimeError("a bug")


class _BrokenBackend(CommandBackend):
    def __init__(self, parser: type[CommandParser]) -> None:
        super().__init__()
        self._parser = parser

    def parser(self) -> CommandParser:
        return self._parser()


async def test_a_child_ended_by_a_bug_of_ours_while_it_runs_still_has_resources() -> None:
    harness = Harness(backend=_BrokenBackend(_BrokenTurnsParser))
    try:
        plan = attrs.evolve(command("sleep", "30"), max_turns=5)
        run = await harness.finish(harness.launch(plan))
        child = run.children[0]
        assert child.status is RunStatus.FAILED and child.error is not None
        assert child.error.code == "internal"
        assert child.resources is not None and child.resources.processes >= 1
        assert processes_with_marker(run.run_id) == []
    finally:
        await harness.orchestrator.shutdown("test over")


async def test_a_child_whose_outcome_a_bug_cannot_read_keeps_the_usage_reported() -> None:
    harness = Harness(backend=_BrokenBackend(_BrokenOutcomeParser))
    run = await harness.finish(harness.launch(command("sh", "-c", "echo one; echo two")))
    child = run.children[0]
    assert child.status is RunStatus.FAILED and child.error is not None
    assert child.error.code == "internal"
    assert child.usage == Usage(2, 1, 0, 0) and child.resources is not None
