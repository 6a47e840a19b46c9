"""`runs` and `show` print a run's usage: every attempt of every child summed, as its
snapshot's `usage` (protocol.md §7.2, §7.3, §12), read from a state directory."""

from __future__ import annotations

import json
from pathlib import Path

from subagent_host.runs.endings import ChildCompleted, ChildExit, Completed
from subagent_host.runs.state import ChildRun, RunStateMachine
from subagent_host.store import writes
from subagent_host.store.database import Database
from subagent_host.store.rows import run_row
from subagent_host.values.facts import Usage
from tests.store.test_store import make_run, ticking
from tests.terminal.inspecting import command, state

FIRST = Usage(1200, 250, 0, 0, 0.5)
RESUMED = Usage(300, 50, 0, 0, 0.25)


async def write_resumed_run(tmp_path: Path) -> str:
    """A state directory holding one run of two agent children, the second resumed once:
    usage FIRST for every attempt but the resumed one's, RESUMED."""
    state_machine = RunStateMachine(clock=ticking())
    run = make_run("a" * 32, children=2)
    state_machine.start(run)
    for child in run.children:
        state_machine.start_child(run, child)
        state_machine.transition_child(run, child, ChildCompleted(exit=ChildExit(usage=FIRST)))
    state_machine.transition(run, Completed())
    store = await Database.open(state(tmp_path))
    try:
        await store.call(writes.save, store, "instance", [run_row(run, list(run.events))], 100)
        resumed = ChildRun(index=1, backend="pi", attempt=2)
        run.replace_child(resumed)
        state_machine.start_child(run, resumed)
        state_machine.transition_child(run, resumed, ChildCompleted(exit=ChildExit(usage=RESUMED)))
        await store.call(writes.save, store, "instance", [run_row(run, [])], 100)
    finally:
        await store.close()
    return run.run_id


async def test_runs_and_show_print_a_runs_usage_over_every_attempt(tmp_path: Path) -> None:
    run_id = await write_resumed_run(tmp_path)
    where = ("--state-dir", str(state(tmp_path)))
    total = {"inputTokens": 2700, "outputTokens": 550, "cacheReadTokens": 0,
             "cacheWriteTokens": 0, "costUsd": 1.25}  # fmt: skip

    listed = await command("runs", "--json", *where)
    assert listed.status == 0 and json.loads(listed.stdout)[0]["usage"] == total
    table = await command("runs", *where)
    assert table.status == 0
    (row,) = [line for line in table.stdout.splitlines() if line.startswith(run_id[:8])]
    assert "2.7k in, 550 out" in row and "$1.2500" in row

    shown = await command("show", run_id, *where)
    assert shown.status == 0, shown
    assert "tokens       2.7k in, 550 out" in shown.stdout
    assert "cost         $1.2500" in shown.stdout
    snapshot = await command("show", run_id, "--json", *where)
    assert json.loads(snapshot.stdout)["usage"] == total
