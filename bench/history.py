"""Benchmark of the run history: listing a large history, and the loop while it is written.

What is measured
----------------
1. `status {}` over a large history. A state directory is filled, before the
   server starts, with N (10,000) finished runs written by the server's own
   store code: (a) 100 sessions of 100 runs (every session at its default
   history limit), the bench's session among them; (b) all N runs in the
   bench's session (as with a raised history limit). Against each, a server is
   started and `status {}` is sent 50 times in a row (after 5 untimed ones).
   Baseline: `ping` on the same connection, the cost of any round trip.
   Target: median `status {}` <= 20 ms.
2. The loop while the store writes. A background run streams 20,000 lines, a
   few at a time (`stream: true`: one `output` event per chunk, every event
   recorded) while
   `ping` is sent in a loop; the ping round trips are compared with those of
   the same server when idle. Writes happen on the store's thread; a long stall
   of the loop would show as a slow ping. Reported: median, p99 and max.

How to run
----------
    .venv/bin/python bench/history.py [--runs N] [--server CMD]

Exits 0 whether or not the target is met; 1 on any protocol error or timeout.
"""

from __future__ import annotations

import sys  # noqa: I001 -- the path is set before any other import
from pathlib import Path

# Run as `python bench/NAME.py`, imports start at the repository's root, not in
# bench/: `bench.common` is found, and bench/ray.py does not stand in for Ray.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import asyncio
import shlex
import statistics
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from bench.common import BenchError, bounded
from bench.runs import (
    Row,
    Server,
    close_server,
    default_server,
    format_table,
    median,
    request,
    run_id_of,
    start_server,
    timed_request,
    wait_event,
    wait_ready,
)
from subagent_host.runs.endings import ChildCompleted, ChildExit, Completed
from subagent_host.runs.state import ChildRun, Run, RunStateMachine
from subagent_host.store import rows as stored_rows
from subagent_host.store import writes
from subagent_host.store.database import Database
from subagent_host.values import RunKind
from subagent_host.values.facts import OutputInfo

SESSION: Final = "bench-session"
LISTS: Final = 50
WARMUP: Final = 5
TARGET_LIST_MS: Final = 20.0
STREAM_LINES: Final = 20_000


def finished_run(run_id: str, session_id: str, created: datetime) -> Run:
    state_machine = RunStateMachine(clock=lambda: created)
    run = Run(
        run_id=run_id,
        session_id=session_id,
        kind=RunKind.SINGLE,
        fingerprint="sha256:v1:" + "0" * 64,
        created_at=created,
        children=[ChildRun(index=0, backend="command")],
        label=f"run {run_id[:8]}",
    )
    output = OutputInfo(text="done\n" * 40, truncated=False, bytes=200, lines=40, partial=False)
    state_machine.start(run)
    state_machine.start_child(run, run.children[0], pid=1)
    state_machine.transition_child(
        run, run.children[0], ChildCompleted(output, ChildExit(exit_code=0))
    )
    state_machine.transition(run, Completed(output))
    return run


async def fill(state_dir: Path, runs: int, sessions: int) -> None:
    """Write `runs` finished runs spread over `sessions` sessions (the bench's is the first)."""
    store = await Database.open(state_dir)
    try:
        start = datetime.now(UTC) - timedelta(days=1)
        rows = []
        for i in range(runs):
            session = SESSION if i % sessions == 0 else f"other-{i % sessions}"
            run = finished_run(f"{i:032x}", session, start + timedelta(milliseconds=i))
            rows.append(stored_rows.run_row(run, list(run.events)))
        await store.call(writes.save, store, "bench-filler", rows, runs)
    finally:
        await store.close()


async def time_calls(server: Server, method: str, count: int) -> list[float]:
    for _ in range(WARMUP):
        await request(server, method, {})
    return [(await timed_request(server, method, {}))[0] for _ in range(count)]


async def bench_list(base: Sequence[str], runs: int, sessions: int, what: str) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="history-bench-") as state_dir:
        await fill(Path(state_dir), runs, sessions)
        server = await start_server([*base, "--state-dir", state_dir, "--session", SESSION])
        try:
            await wait_ready(server)
            listed = await request(server, "status", {})
            count = len(listed.get("runs", []))
            lists = await time_calls(server, "status", LISTS)
            pings = await time_calls(server, "ping", LISTS)
        finally:
            problem = await close_server(server)
        if problem:
            raise BenchError(problem)
    value = median(lists) * 1000
    print(
        f"  {what}: {count} runs listed; status {{}} median {value:.2f} ms, "
        f"max {max(lists) * 1000:.2f} ms; ping median {median(pings) * 1000:.2f} ms"
    )
    return [
        Row(
            f"status {{}}, {what}",
            "ms",
            value,
            f"<= {TARGET_LIST_MS:g} ms",
            value <= TARGET_LIST_MS,
            median(pings) * 1000,
        )
    ]


def p99(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


async def pings_until(server: Server, done: asyncio.Future[int]) -> list[float]:
    times: list[float] = []
    while not done.done() or len(times) < 20:
        times.append((await timed_request(server, "ping", {}))[0])
    return times


async def bench_loop(base: Sequence[str]) -> list[Row]:
    # Paced a little, so output arrives in many small chunks: one event (and one
    # recorded change) each, the worst case for the store.
    writer = (
        "import time\n"
        f"for i in range({STREAM_LINES}):\n"
        "    print('line', i, flush=True)\n"
        "    if i % 10 == 0: time.sleep(0.0005)\n"
    )
    with tempfile.TemporaryDirectory(prefix="history-bench-") as state_dir:
        server = await start_server([*base, "--state-dir", state_dir])
        try:
            await wait_ready(server)
            idle = await time_calls(server, "ping", 200)
            spawned = await request(
                server, "spawn", {"command": [sys.executable, "-c", writer], "stream": True}
            )
            run_id = run_id_of(spawned)
            finished = asyncio.ensure_future(wait_terminal(server, run_id))
            busy = await bounded(pings_until(server, finished), "pinging while writing")
            final = await finished
        finally:
            problem = await close_server(server)
        if problem:
            raise BenchError(problem)
    print(
        f"  ping while recording {final} events: median {median(busy) * 1000:.2f} ms, "
        f"p99 {p99(busy) * 1000:.2f} ms, max {max(busy) * 1000:.2f} ms; idle median "
        f"{median(idle) * 1000:.2f} ms, p99 {p99(idle) * 1000:.2f} ms"
    )
    return [
        Row(
            "ping while recording, median",
            "ms",
            median(busy) * 1000,
            "-",
            None,
            median(idle) * 1000,
        ),
        Row("ping while recording, p99", "ms", p99(busy) * 1000, "-", None, p99(idle) * 1000),
    ]


async def wait_terminal(server: Server, run_id: str) -> int:
    """Wait for the run's terminal `status` event; return how many events it recorded."""
    await wait_event(
        server,
        run_id,
        lambda event: event["type"] == "status" and event["status"] not in ("queued", "running"),
        "the streaming run's end",
    )
    snapshot = await request(server, "status", {"runId": run_id})
    return int(snapshot["lastSeq"])


async def run(opts: argparse.Namespace) -> int:
    base = shlex.split(opts.server)
    rows: list[Row] = []
    try:
        print("1. status {} over a large history")
        rows += await bench_list(base, opts.runs, 100, f"{opts.runs:,} runs, 100 sessions")
        rows += await bench_list(base, opts.runs, 1, f"{opts.runs:,} runs, one session")
        print("2. the loop while the store writes")
        rows += await bench_loop(base)
    except BenchError as exc:
        print(f"history bench failed: {exc}", file=sys.stderr)
        return 1
    print()
    print("\n".join(format_table(rows)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10_000, metavar="N")
    parser.add_argument("--server", default=default_server(), metavar="CMD")
    started = time.perf_counter()
    code = asyncio.run(run(parser.parse_args(argv)))
    print(f"(took {time.perf_counter() - started:.1f} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
