"""A run's usage as the history gives it back: every attempt of every child summed, in the
run read back and in the session's listing (protocol.md §12, §13)."""

from __future__ import annotations

from subagent_host.runs.endings import ChildCompleted, ChildExit, Completed
from subagent_host.runs.state import ChildRun, Run, RunStateMachine
from subagent_host.store import reads
from subagent_host.store.database import Database
from subagent_host.store.records import run_record
from subagent_host.values.facts import Usage
from tests.store.test_store import completed_run, make_run, save, store, ticking

__all__ = ["store"]  # the fixture

FIRST = Usage(100, 20, 5, 1, 0.5)
SECOND = Usage(10, 2, 0, 0, 0.25)
RESUMED = Usage(1, 1, 1, 1, 0.125)


def ended(state_machine: RunStateMachine, run: Run, child: ChildRun, usage: Usage | None) -> None:
    state_machine.start_child(run, child)
    state_machine.transition_child(run, child, ChildCompleted(exit=ChildExit(usage=usage)))


async def test_a_run_read_back_counts_every_attempt_of_every_child(store: Database) -> None:
    state_machine = RunStateMachine(clock=ticking())
    run = make_run("r1", children=2)
    state_machine.start(run)
    ended(state_machine, run, run.children[0], FIRST)
    ended(state_machine, run, run.children[1], SECOND)
    state_machine.transition(run, Completed())
    await save(store, run)
    resumed = ChildRun(index=1, backend="command", attempt=2)
    run.replace_child(resumed)
    ended(state_machine, run, resumed, RESUMED)
    await save(store, run)
    assert run.usage == Usage(111, 23, 6, 2, 0.875)
    assert "earlier_usage" not in run_record(run)  # the attempts' rows are what counts

    loaded = await store.call(reads.load_run, store, "r1")
    assert loaded is not None and loaded.children[1].attempt == 2
    assert loaded.earlier_usage == SECOND and loaded.usage == run.usage
    (summary,) = await store.call(reads.list_runs, store, "s1", 10)
    assert summary.usage == run.usage


async def test_a_listing_sums_each_run_alone_and_leaves_a_run_without_usage_bare(
    store: Database,
) -> None:
    state_machine = RunStateMachine(clock=ticking())
    bare = completed_run(state_machine, "r0", minute=0)
    priced = make_run("r1", minute=1)
    unpriced = make_run("r2", minute=2, children=2)
    other = make_run("x9", session_id="s2", minute=9)
    for run, usages in (
        (priced, [FIRST]),
        (unpriced, [FIRST, Usage(1, 2, 3, 4)]),
        (other, [SECOND]),
    ):
        for child, usage in zip(run.children, usages, strict=True):
            ended(state_machine, run, child, usage)
    await save(store, bare, priced, unpriced, other)

    summaries = await store.call(reads.list_runs, store, "s1", 10)
    assert [(s.run_id, s.usage) for s in summaries] == [
        ("r2", Usage(101, 22, 8, 5, None)),  # one child reported no cost: no total cost
        ("r1", FIRST),
        ("r0", None),
    ]
    assert [s.usage for s in await store.call(reads.list_runs, store, "s2", 10)] == [SECOND]
