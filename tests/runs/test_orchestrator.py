"""The orchestrator with real processes: statuses, stop, timeouts, chains, parallel, the limit."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs
import pytest

from subagent_host.backends.base import Backend, ItemSpec, Launch, ParsedOutcome
from subagent_host.backends.command import CommandBackend, CommandParser
from subagent_host.backends.exits import ProcessExit, StoppedBy
from subagent_host.backends.supervisor import Supervisor
from subagent_host.errors import CapacityExceeded
from subagent_host.planning.plan import ChildPlan, RunPlan
from subagent_host.planning.prepare import launch_plan
from subagent_host.runs import child_runner
from subagent_host.runs.orchestrator import OutputCaps, RunOrchestrator
from subagent_host.runs.scheduler import Slots
from subagent_host.runs.services import ChildServices
from subagent_host.runs.state import (
    TERMINAL,
    ChildRun,
    Run,
    RunEvent,
    RunStateMachine,
    RunStatus,
)
from subagent_host.values import RunKind
from subagent_host.values.error_data import QueueFull
from subagent_host.values.events import ActivityEvent, ChildEvent, OutputEvent, StatusEvent
from subagent_host.values.facts import Usage
from tests.backends.conftest import processes_with_marker

FAKES = Path(__file__).resolve().parent.parent / "fakes"
WAIT_S = 30.0
CAPS = OutputCaps(bytes=48 * 1024, lines=600, parallel_bytes=12 * 1024, parallel_lines=160,
                  previous_bytes=64)  # fmt: skip


class Harness:
    def __init__(
        self,
        limit: int = 4,
        backend: CommandBackend | None = None,
        more: Mapping[str, Backend] | None = None,
        max_queue: int = 1000,
    ) -> None:
        self.events: list[tuple[str, RunEvent]] = []
        self.changed = asyncio.Event()
        self.state_machine = RunStateMachine(listener=self.record)
        self.backends: dict[str, Backend] = {"command": backend or CommandBackend(), **(more or {})}
        services = ChildServices(
            supervisor=Supervisor(),
            backends=self.backends,
            slots=Slots(limit),
            state_machine=self.state_machine,
            caps=CAPS,
            server_env=os.environ,
            depth=0,
        )
        self.orchestrator = RunOrchestrator(
            services,
            grace_ms=2000,
            max_queue=max_queue,
        )
        self.runs: list[Run] = []

    def record(self, run: Run, event: RunEvent) -> None:
        self.events.append((run.run_id, event))
        self.changed.set()

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait, event by event, until `condition` holds."""
        async with asyncio.timeout(WAIT_S):
            while not condition():
                self.changed.clear()
                await self.changed.wait()

    def launch(
        self, *children: ChildPlan, kind: RunKind = RunKind.SINGLE, stream: bool = False
    ) -> Run:
        plan = launch_plan(RunPlan(kind=kind, children=children, stream=stream), self.backends)
        run = self.orchestrator.launch(plan, "s1")
        self.runs.append(run)
        return run

    def events_of(self, run: Run) -> list[RunEvent]:
        """Every event the run emitted (the run itself holds none once it has ended)."""
        return [event for run_id, event in self.events if run_id == run.run_id]

    async def finish(self, run: Run) -> Run:
        await asyncio.wait_for(self.orchestrator.wait(run), WAIT_S)
        assert_terminal_table(run)
        return run


def assert_terminal_table(run: Run) -> None:
    """protocol.md §12: every terminal status carries what it must, for the run and each child."""
    items: list[Run | ChildRun] = [run, *run.children]
    for item in items:
        assert item.status in TERMINAL
        if item.status is RunStatus.COMPLETED:
            assert item.output is None or not item.output.partial
        else:
            assert item.output is None or item.output.partial
        if item.status is RunStatus.FAILED:
            assert item.error is not None
        if item.status in (RunStatus.CANCELLED, RunStatus.TIMED_OUT, RunStatus.INTERRUPTED):
            assert item.reason
    if run.status is RunStatus.TIMED_OUT:
        assert run.enforced_timeout_ms is not None


def command(*argv: str, timeout_ms: int = 60_000, stall_ms: int = 60_000,
            prompt: str | None = None, label: str | None = None) -> ChildPlan:  # fmt: skip
    return ChildPlan(
        backend="command",
        cwd=str(FAKES),
        timeout_ms=timeout_ms,
        stall_timeout_ms=stall_ms,
        command=argv,
        prompt=prompt,
        label=label,
    )


async def test_an_echo_run_completes_with_its_output(runs: Harness) -> None:
    run = await runs.finish(runs.launch(command("echo", "hello")))
    assert run.status is RunStatus.COMPLETED
    assert run.output is not None and run.output.text == "hello\n"
    assert (run.children[0].exit_code, run.children[0].pid is not None) == (0, True)


async def test_a_non_zero_exit_fails_with_the_status_and_a_stderr_tail(runs: Harness) -> None:
    run = await runs.finish(runs.launch(command("sh", "-c", "echo why >&2; exit 4")))
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.data == {"stderrTail": "why\n", "exitCode": 4}
    assert run.children[0].exit_code == 4


async def test_a_missing_program_fails_without_running(runs: Harness) -> None:
    run = await runs.finish(runs.launch(command("/nonexistent/tool")))
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.code == "spawn-failed"


async def test_stop_cancels_a_running_tree_and_nothing_survives(runs: Harness) -> None:
    run = runs.launch(command(sys.executable, str(FAKES / "tree.py"), "6"), stream=True)
    # The tree prints "ready" once all six processes exist.
    await runs.until(lambda: any(e.type == "output" for _, e in runs.events))
    assert await runs.orchestrator.stop(run, grace_ms=5000, reason="user asked") is False
    assert run.status is RunStatus.CANCELLED and run.reason == "user asked"
    assert (
        await runs.orchestrator.stop(run, grace_ms=5000, reason="again") is True
    )  # already terminal
    assert run.reason == "user asked"
    assert_terminal_table(run)


async def test_timeout_ends_the_child_as_timed_out(runs: Harness) -> None:
    run = await runs.finish(runs.launch(command("sleep", "60", timeout_ms=300)))
    assert (run.status, run.reason, run.enforced_timeout_ms) == (
        RunStatus.TIMED_OUT,
        "timeout",
        300,
    )


async def test_a_silent_child_is_ended_as_stalled(runs: Harness) -> None:
    run = await runs.finish(runs.launch(command("sh", "-c", "echo start; sleep 60", stall_ms=300)))
    assert (run.status, run.reason, run.enforced_timeout_ms) == (RunStatus.TIMED_OUT, "stall", 300)
    assert run.output is not None and run.output.partial and run.output.text == "start\n"


class ToolRunningParser(CommandParser):
    """A command parser that reports a tool running while `TOOL` is on the last line."""

    @property
    def tool_running(self) -> bool:
        return self.stdout.result().text.rstrip("\n").endswith("TOOL")


class ToolRunningBackend(CommandBackend):
    def parser(self) -> ToolRunningParser:
        return ToolRunningParser()


async def test_silence_while_an_agents_tool_runs_is_not_a_stall() -> None:
    harness = Harness(backend=ToolRunningBackend())
    script = "echo TOOL; sleep 1; echo done"  # silent for over three stall periods
    run = await harness.finish(harness.launch(command("sh", "-c", script, stall_ms=300)))
    assert run.status is RunStatus.COMPLETED, (run.status, run.reason)


async def test_a_chain_passes_previous_output_on_capped(runs: Harness) -> None:
    run = await runs.finish(
        runs.launch(
            command("sh", "-c", "printf '%0100d' 0"),
            command("cat", prompt="got: {previous}"),
            kind=RunKind.CHAIN,
        )
    )
    assert run.status is RunStatus.COMPLETED and run.output is not None
    assert run.output.text == "got: " + "0" * 64 + "\n[previous output truncated]"


async def test_a_chain_stops_at_the_first_child_that_does_not_complete(runs: Harness) -> None:
    run = await runs.finish(
        runs.launch(command("true"), command("false"), command("echo", "never"), kind=RunKind.CHAIN)
    )
    assert [c.status for c in run.children] == [
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
    ]
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.message.startswith("child 1: ")


async def test_parallel_tasks_run_together_and_are_summarized(runs: Harness) -> None:
    run = await runs.finish(
        runs.launch(
            command("echo", "a", label="first"), command("echo", "b"), kind=RunKind.PARALLEL
        )
    )
    assert run.status is RunStatus.COMPLETED and run.output is not None
    assert run.output.text == "[0] first completed\na\n\n[1] completed\nb\n"


async def test_the_concurrency_limit_queues_children_in_order() -> None:
    harness = Harness(limit=1)
    first = harness.launch(command("sleep", "0.3"))
    second = harness.launch(command("echo", "second"))
    await harness.until(lambda: first.children[0].status is RunStatus.RUNNING)
    assert second.children[0].status is RunStatus.QUEUED
    await harness.finish(first)
    await harness.finish(second)
    assert second.children[0].started_at >= first.children[0].ended_at  # type: ignore[operator]


async def test_a_run_is_queued_until_its_first_child_starts() -> None:
    harness = Harness(limit=1)
    blocker = harness.launch(command("sleep", "30"))
    waiting = harness.launch(command("echo", "later"))
    await harness.until(lambda: blocker.children[0].status is RunStatus.RUNNING)
    assert blocker.status is RunStatus.RUNNING and blocker.started_at is not None
    assert waiting.status is RunStatus.QUEUED and waiting.started_at is None
    await harness.orchestrator.stop(blocker, grace_ms=100, reason="make room")
    await harness.finish(waiting)
    statuses = [
        e.payload.status for e in harness.events_of(waiting) if isinstance(e.payload, StatusEvent)
    ]
    assert statuses == ["queued", "running", "completed"]
    assert waiting.started_at is not None and waiting.started_at >= blocker.ended_at


async def test_stop_while_queued_cancels_without_starting(runs: Harness) -> None:
    harness = Harness(limit=1)
    blocker = harness.launch(command("sleep", "30"))
    queued = harness.launch(command("echo", "never"))
    await harness.until(lambda: blocker.children[0].status is RunStatus.RUNNING)
    assert await harness.orchestrator.stop(queued, grace_ms=100, reason="changed my mind") is False
    assert queued.status is RunStatus.CANCELLED and queued.children[0].pid is None
    await harness.orchestrator.stop(blocker, grace_ms=100, reason="done")
    assert_terminal_table(queued)


async def test_event_seq_has_no_gaps(runs: Harness) -> None:
    run = await runs.finish(runs.launch(command("echo", "x"), stream=True))
    events = runs.events_of(run)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    first = [(e.type, getattr(e.payload, "status", None)) for e in events][:3]
    assert first == [("status", "queued"), ("status", "running"), ("child", "running")]


async def test_resources_of_a_running_tree_are_sampled(runs: Harness) -> None:
    # Longer than one sampling interval: a sample sees it.
    run = await runs.finish(runs.launch(command("sh", "-c", "sleep 0.7; sleep 0.7")))
    resources = run.children[0].resources
    assert resources is not None
    assert resources.processes >= 1 and resources.peak_rss_bytes > 0 and resources.cpu_seconds >= 0


async def test_a_child_too_brief_to_sample_still_has_resources(runs: Harness) -> None:
    run = await runs.finish(runs.launch(command("true")))
    resources = run.children[0].resources
    assert resources is not None and resources.processes == 1
    # No sample saw it: 0 (or a memory controller's small figure), never the peak the fork
    # inherited from this process (tens of MB).
    assert resources.peak_rss_bytes < 10_000_000


async def test_stop_racing_the_exit_ends_with_exactly_one_terminal_status(runs: Harness) -> None:
    for _ in range(20):
        run = runs.launch(command("true"))
        await runs.orchestrator.stop(run, grace_ms=1000, reason="race")
        assert_terminal_table(run)
        assert run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED)
        statuses = [
            e.payload.status for e in runs.events_of(run) if isinstance(e.payload, StatusEvent)
        ]
        assert statuses[-1] == run.status and sum(s in TERMINAL for s in statuses) == 1


async def test_two_stops_at_once_agree(runs: Harness) -> None:
    run = runs.launch(command("sleep", "30"))
    await runs.until(lambda: run.children[0].status is RunStatus.RUNNING)
    first, second = await asyncio.gather(
        runs.orchestrator.stop(run, grace_ms=1000, reason="one"),
        runs.orchestrator.stop(run, grace_ms=1000, reason="two"),
    )
    assert (first, second) == (False, False)
    assert run.status is RunStatus.CANCELLED and run.reason == "one"
    events = runs.events_of(run)
    assert (
        sum(isinstance(e.payload, StatusEvent) and e.payload.status in TERMINAL for e in events)
        == 1
    )


def ready(harness: Harness, run: Run) -> bool:
    return any(
        isinstance(e.payload, OutputEvent) and "ready" in e.payload.text
        for e in harness.events_of(run)
    )


async def test_each_child_records_whether_it_exited_or_sigterm_or_sigkill_ended_it(
    runs: Harness,
) -> None:
    tree = (sys.executable, str(FAKES / "tree.py"), "1")
    exited = await runs.finish(runs.launch(command("true")))
    honours = runs.launch(command(*tree), stream=True)
    ignores = runs.launch(command(*tree, "--ignore-term"), stream=True)
    await runs.until(lambda: ready(runs, honours) and ready(runs, ignores))
    await asyncio.gather(
        runs.orchestrator.stop(honours, grace_ms=5000, reason="asked"),
        runs.orchestrator.stop(ignores, grace_ms=100, reason="asked"),
    )
    ended = [run.children[0].stopped_by for run in (exited, honours, ignores)]
    assert ended == [StoppedBy.EXIT, StoppedBy.SIGTERM, StoppedBy.SIGKILL]
    assert [run.children[0].signal for run in (exited, honours, ignores)] == [None, 15, 9]


async def test_a_child_that_never_started_records_no_ending() -> None:
    harness = Harness(limit=1)
    try:
        first = harness.launch(command("sleep", "30"))
        queued = harness.launch(command("true"))
        await harness.until(lambda: first.children[0].status is RunStatus.RUNNING)
        await harness.orchestrator.stop(queued, grace_ms=1000, reason="never mind")
        assert (queued.children[0].status, queued.children[0].stopped_by) == (
            RunStatus.CANCELLED,
            None,
        )
    finally:
        await harness.orchestrator.shutdown("test over")


class _FinishingParser(CommandParser):
    """Reports the final event once `FINAL` was printed, as an agent CLI's parser does."""

    @property
    def finished(self) -> bool:
        return "FINAL" in self.stdout.result().text


class _FinishingBackend(CommandBackend):
    def parser(self) -> _FinishingParser:
        return _FinishingParser()


async def test_a_child_lingering_after_its_final_event_records_the_signal_that_ended_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(child_runner, "FINISHED_GRACE_S", 0.05)
    harness = Harness(backend=_FinishingBackend())
    try:
        run = await harness.finish(harness.launch(command("sh", "-c", "echo FINAL; exec sleep 30")))
        assert (run.children[0].signal, run.children[0].stopped_by) == (15, StoppedBy.SIGTERM)
        assert processes_with_marker(run.run_id) == []
    finally:
        await harness.orchestrator.shutdown("test over")


class _TalkativeParser(CommandParser):
    """Reports each stdout line as activity, and usage and a session id at the end."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: list[str] = []

    def on_stdout(self, data: bytes) -> None:
        super().on_stdout(data)
        self._pending += [f"said {line}" for line in data.decode().split()]

    def activity(self) -> list[str]:
        pending, self._pending = self._pending, []
        return pending

    def outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        base = super().outcome(exit_status)
        return attrs.evolve(base, usage=Usage(3, 4, 0, 0, 0.01), backend_session_id="sess-1")


class _TalkativeBackend(CommandBackend):
    def parser(self) -> _TalkativeParser:
        return _TalkativeParser()


async def test_backend_activity_usage_and_session_reach_the_run() -> None:
    harness = Harness(backend=_TalkativeBackend())
    run = await harness.finish(harness.launch(command("echo", "hi")))
    assert [
        (e.type, e.payload.text)
        for e in harness.events_of(run)
        if isinstance(e.payload, ActivityEvent)
    ] == [("activity", "said hi")]
    child = run.children[0]
    assert child.usage == Usage(3, 4, 0, 0, 0.01) and child.backend_session_id == "sess-1"


class _BrokenBackend(CommandBackend):
    """A backend with a bug: making the output parser of a started run raises."""

    def parser(self) -> CommandParser:
        raise RuntimeError("a bug")


async def test_a_bug_of_ours_still_ends_the_run_once_as_failed_internal() -> None:
    harness = Harness(backend=_BrokenBackend())
    run = await harness.finish(harness.launch(command("true")))
    assert run.status is RunStatus.FAILED and run.error is not None
    assert (run.error.code, run.error.message) == ("internal", "internal error (RuntimeError)")
    assert [(c.status, c.error) for c in run.children] == [(RunStatus.FAILED, run.error)]
    statuses = [e.payload.status for _, e in harness.events if isinstance(e.payload, StatusEvent)]
    assert statuses == ["queued", "failed"]  # no child ever started


class _MiscountingParser(CommandParser):
    """A parser with a bug the supervision trips over while the child runs."""

    @property
    def turns(self) -> int:
        raise RuntimeError("a bug")


class _MiscountingBackend(CommandBackend):
    def parser(self) -> _MiscountingParser:
        return _MiscountingParser()


async def test_a_bug_of_ours_while_a_child_runs_ends_its_tree_and_records_the_signal() -> None:
    harness = Harness(backend=_MiscountingBackend())
    try:
        run = harness.launch(attrs.evolve(command("sleep", "30"), max_turns=1))
        run = await harness.finish(run)
        assert run.status is RunStatus.FAILED and run.error is not None
        assert run.error.code == "internal"
        child = run.children[0]
        assert (child.status, child.error) == (RunStatus.FAILED, run.error)
        assert (child.signal, child.stopped_by) == (15, StoppedBy.SIGTERM)
        assert processes_with_marker(run.run_id) == []
    finally:
        await harness.orchestrator.shutdown("test over")


class _UnreadableExitParser(CommandParser):
    """A parser with a bug that shows only once the child has exited."""

    def outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        raise RuntimeError("a bug")


class _UnreadableExitBackend(CommandBackend):
    def parser(self) -> _UnreadableExitParser:
        return _UnreadableExitParser()


async def test_a_bug_of_ours_after_a_child_exited_still_records_how_it_ended() -> None:
    harness = Harness(backend=_UnreadableExitBackend())
    run = await harness.finish(harness.launch(command("sh", "-c", "exit 3")))
    assert run.status is RunStatus.FAILED and run.error is not None
    child = run.children[0]
    assert (child.status, child.error) == (RunStatus.FAILED, run.error)
    assert (child.exit_code, child.signal, child.stopped_by) == (3, None, StoppedBy.EXIT)
    assert [
        e.payload.status for e in harness.events_of(run) if isinstance(e.payload, ChildEvent)
    ] == [
        "running",
        "failed",
    ]  # one terminal status: the run's own failure did not add a second


class _SpyAgent(CommandBackend):
    """An agent backend that records every item it prepares (it would run `cat`)."""

    def __init__(self) -> None:
        super().__init__()
        self.id = "pi"
        self.prepared: list[ItemSpec] = []

    def prepare(self, item: ItemSpec) -> Launch:
        self.prepared.append(item)
        return Launch(argv=("cat",), stdin=(item.prompt or "").encode(), env={}, cwd=item.cwd)


async def test_an_agent_whose_prompt_fills_to_nothing_fails_without_starting() -> None:
    spy = _SpyAgent()
    harness = Harness(more={"pi": spy})
    agent = ChildPlan(backend="pi", cwd=str(FAKES), timeout_ms=60_000,
                      stall_timeout_ms=60_000, prompt=" {previous}\n")  # fmt: skip
    run = await harness.finish(harness.launch(command("printf", "  \n"), agent, kind=RunKind.CHAIN))
    child = run.children[1]
    assert child.status is RunStatus.FAILED and child.error is not None
    assert child.error.code == "empty-prompt"
    assert (child.pid, child.started_at) == (None, None)
    # Only the plan's template was prepared (for its fingerprint), never a launch.
    assert [item.prompt for item in spy.prepared] == [" {previous}\n"]
    started = [e for e in harness.events_of(run) if getattr(e.payload, "index", None) == 1]
    assert [e.payload.status for e in started if isinstance(e.payload, ChildEvent)] == ["failed"]
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.code == "empty-prompt"


async def test_a_command_whose_prompt_fills_to_nothing_still_runs(runs: Harness) -> None:
    run = await runs.finish(
        runs.launch(command("true"), command("cat", prompt="{previous}"), kind=RunKind.CHAIN)
    )
    assert run.status is RunStatus.COMPLETED and run.children[1].pid is not None


class _TurnCountingParser(CommandParser):
    """Counts each `TURN` line on stdout as a model response begun (as agent parsers do)."""

    def __init__(self) -> None:
        super().__init__()
        self.counted = 0

    def on_stdout(self, data: bytes) -> None:
        super().on_stdout(data)
        self.counted += data.split().count(b"TURN")

    @property
    def turns(self) -> int:
        return self.counted


class _TurnCountingBackend(CommandBackend):
    def parser(self) -> _TurnCountingParser:
        return _TurnCountingParser()


def turning(script: str, max_turns: int | None) -> ChildPlan:
    return attrs.evolve(command("sh", "-c", script), max_turns=max_turns)


# Three responses, each begun with a line, then a tool that would run for a long time.
THREE_TURNS = "for i in 1 2 3; do echo TURN; sleep 0.1; done; sleep 30"


async def test_a_child_that_begins_one_turn_more_than_max_turns_is_ended_limit_reached() -> None:
    harness = Harness(backend=_TurnCountingBackend())
    try:
        run = await harness.finish(harness.launch(turning(THREE_TURNS, max_turns=2)))
        child = run.children[0]
        assert run.status is RunStatus.LIMIT_REACHED and run.reached_limit == "max-turns"
        assert child.status is RunStatus.LIMIT_REACHED and child.reason == "max-turns"
        assert child.output is not None and child.output.partial
        assert child.output.text == "TURN\nTURN\nTURN\n"  # ended as turn 3 began
        assert processes_with_marker(run.run_id) == []
    finally:
        await harness.orchestrator.shutdown("test over")


async def test_a_child_within_its_max_turns_completes() -> None:
    harness = Harness(backend=_TurnCountingBackend())
    run = await harness.finish(harness.launch(turning("echo TURN; echo TURN", max_turns=2)))
    assert run.status is RunStatus.COMPLETED and run.reached_limit is None


async def test_without_max_turns_turns_are_not_limited() -> None:
    harness = Harness(backend=_TurnCountingBackend())
    run = await harness.finish(harness.launch(turning("echo TURN; echo TURN; echo TURN", None)))
    assert run.status is RunStatus.COMPLETED


async def test_the_first_of_timeout_and_turn_limit_wins() -> None:
    harness = Harness(backend=_TurnCountingBackend())
    slow = attrs.evolve(turning(THREE_TURNS, max_turns=2), timeout_ms=50)
    run = await harness.finish(harness.launch(slow))
    assert run.status is RunStatus.TIMED_OUT and run.reason == "timeout"
    assert run.reached_limit is None and run.children[0].status is RunStatus.TIMED_OUT


async def test_a_launch_that_would_queue_more_than_max_queue_is_refused_with_nothing_made() -> None:
    harness = Harness(limit=1, max_queue=1)
    blocker = harness.launch(command("sleep", "30"))
    await harness.until(lambda: blocker.children[0].status is RunStatus.RUNNING)
    waiting = harness.launch(command("echo", "later"))
    events_before = len(harness.events)
    with pytest.raises(CapacityExceeded) as refused:
        harness.launch(command("echo", "one too many"))
    assert refused.value.data == QueueFull(queued=1, limit=1)
    with pytest.raises(CapacityExceeded):  # a tasks spawn counts every child
        harness.launch(command("echo", "a"), command("echo", "b"), kind=RunKind.PARALLEL)
    assert len(harness.events) == events_before
    assert {run.run_id for run in harness.orchestrator.live()} == {blocker.run_id, waiting.run_id}
    await harness.orchestrator.stop(blocker, grace_ms=100, reason="make room")
    await harness.finish(waiting)
    await harness.finish(harness.launch(command("echo", "room again")))


async def test_children_that_find_a_free_slot_do_not_count_against_max_queue() -> None:
    harness = Harness(limit=2, max_queue=0)
    both = harness.launch(command("sleep", "30"), command("sleep", "30"), kind=RunKind.PARALLEL)
    with pytest.raises(CapacityExceeded) as refused:
        harness.launch(command("echo", "would wait"))
    assert refused.value.data == QueueFull(queued=0, limit=0)
    await harness.orchestrator.stop(both, grace_ms=100, reason="done")
    assert_terminal_table(both)


async def test_a_resume_that_would_queue_more_than_max_queue_changes_nothing() -> None:
    harness = Harness(limit=1, max_queue=0)
    done = await harness.finish(harness.launch(command("echo", "first")))
    blocker = harness.launch(command("sleep", "30"))
    await harness.until(lambda: blocker.children[0].status is RunStatus.RUNNING)
    plan = launch_plan(RunPlan(kind=RunKind.SINGLE, children=(command("echo", "again"),)),
                       harness.backends).children[0]  # fmt: skip
    with pytest.raises(CapacityExceeded):
        harness.orchestrator.resume(done, 0, plan)
    assert done.status is RunStatus.COMPLETED and done.children[0].attempt == 1
    await harness.orchestrator.stop(blocker, grace_ms=100, reason="done")


async def test_an_agent_child_keeps_its_prompts_first_line_to_be_named_by() -> None:
    harness = Harness(more={"pi": _SpyAgent()})
    agent = ChildPlan(backend="pi", cwd=str(FAKES), timeout_ms=60_000, stall_timeout_ms=60_000,
                      prompt="\n  Review   the diff\nand say what is wrong")  # fmt: skip
    run = await harness.finish(harness.launch(command("true"), agent, kind=RunKind.PARALLEL))
    assert [child.prompt_head for child in run.children] == [None, "Review the diff"]
