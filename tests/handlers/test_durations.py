"""`durationMs` of a run and of a child: `endedAt - startedAt` in milliseconds, exactly as
the two timestamps read, and present only once both are there."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.rpc.wire import ChildSnapshot, RunSnapshot, timestamp
from subagent_host.runs.state import ChildRun, Run, RunStatus
from subagent_host.values import RunKind

START = datetime(2026, 12, 1, 12, 0, 0, 900, tzinfo=UTC)  # .000900: reads .000
END = datetime(2026, 12, 1, 12, 0, 1, 100, tzinfo=UTC)  # .000100: reads .000


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def a_run(started: datetime | None, ended: datetime | None) -> Run:
    child = ChildRun(index=0, backend="command", started_at=started, ended_at=ended)
    return Run(
        run_id="r1", session_id="s1", kind=RunKind.SINGLE, fingerprint="f",
        created_at=START, children=[child], started_at=started, ended_at=ended,
    )  # fmt: skip


def wire_difference_ms(item: RunSnapshot | ChildSnapshot) -> int:
    went = item.outcome
    assert went.started_at is not None and went.ended_at is not None
    ended, started = timestamp(went.ended_at), timestamp(went.started_at)  # as sent
    return (parse(ended) - parse(started)) // timedelta(milliseconds=1)


def test_duration_is_the_difference_of_the_two_timestamps_as_they_read() -> None:
    # .000900 -> .001100 is 0.2 ms, but the timestamps read .000 and .001: 1 ms apart.
    for end in (START.replace(microsecond=1100), END, START.replace(second=3, microsecond=999)):
        snapshot = run_snapshot(a_run(START, end))
        for item in (snapshot, snapshot.children[0]):
            assert item.outcome.duration_ms == wire_difference_ms(item), (item, end)


def test_duration_is_absent_until_the_run_has_ended_and_without_a_start() -> None:
    running = run_snapshot(a_run(START, None))
    assert running.outcome.duration_ms is None and running.children[0].outcome.duration_ms is None
    never_started = a_run(None, END)  # e.g. cancelled while queued
    never_started.status = RunStatus.CANCELLED
    snapshot = run_snapshot(never_started)
    assert snapshot.outcome.duration_ms is None
    assert snapshot.children[0].outcome.duration_ms is None
