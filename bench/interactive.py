"""Benchmark of interactive children in the installed subagent-host: a live message's
latency, and what idle interactive children cost the server.

What is measured
----------------
Each section against its own freshly started server (NDJSON framing, a throw-away
`--state-dir`), answered one `ping` before anything is timed.

1. `run/send` latency. One interactive `command` child started without a prompt
   (it waits from its start), a line program that answers each line it reads with
   the time it read it (`time.monotonic()`, CLOCK_MONOTONIC, the clock this process
   reads too). N (200) messages are sent one at a time, each once the previous
   turn has ended (its `turn` `end` event arrived), so each finds the child waiting
   and is written at once (`delivered`, checked). The latency of one is the child's
   read time minus the time just before this process wrote the request: an upper
   bound of the time from the request to the write into the child's stdin, since
   the write happened before the read returned. It holds one thing the server
   does not do: the child's own wake-up on its pipe. Baseline, in the same run
   and interleaved message by message: the same program started by this process,
   each line written straight to its stdin and its read time compared the same
   way (one pipe hop and that wake-up); the difference is what the server adds
   (reading the request, dispatch, the handler, the write). Medians of each, after
   a few untimed messages; for reference the `run/send` round trip (request to
   reply) and the `ping` round trip on the same connection. Target: median
   latency <= 2 ms.
2. Idle interactive children. A server allowed 100 children at once
   (`--max-concurrency 100`): its RSS and its CPU over a window (20 s: two of
   the ten-second samplings of a waiting child) with no child (the baseline),
   then with 100 interactive `command` children (`cat`,
   prompt `hello`: one turn each, then waiting for input) once each one's first
   turn ended: its RSS (the larger of the window's start and end) and its CPU
   over the same window. CPU is read in nanoseconds from
   /proc/<pid>/task/*/schedstat (every thread of the server, not its children).
   Then every child is closed (`run/close`) and must end `completed`. For
   reference, the same count of one-shot children running (`sleep 300`) over the
   same window: what any running child costs (the server samples each running
   child's tree once a second), so that what being interactive adds shows apart.
   Targets: RSS <= 60 MB (decimal), idle CPU < 1 % of a core.

No process is left: the children of each section are looked for by their run id
once it is over, and any found is killed and fails the run.

How to run
----------
    .venv/bin/python bench/interactive.py [--sends N] [--children N]
                                          [--idle-seconds S] [--server CMD]

Exits 0 whether or not the targets are met; 1 on any protocol error, timeout, wrong
answer or process left behind.
"""

from __future__ import annotations

import sys  # noqa: I001 -- the path is set before any other import
from pathlib import Path

# Run as `python bench/NAME.py`, imports start at the repository's root, not in
# bench/: `bench.common` is found, and bench/ray.py does not stand in for Ray.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

import psutil

from bench.common import BenchError, bounded, start_piped
from bench.runs import (
    Json,
    Row,
    Server,
    check_leftovers,
    detail,
    expect_status,
    median,
    ms,
    positive_float,
    positive_int,
    print_table_of,
    request,
    run_id_of,
    server_command,
    serving,
    timed_request,
)

WARMUP: Final = 10
TARGET_SEND_MS: Final = 2.0
TARGET_IDLE_RSS_MB: Final = 60.0
TARGET_IDLE_CPU_PCT: Final = 1.0
STREAM_LIMIT: Final = 1024 * 1024

# Answers each line with the moment it read it: the latency's far end.
READER: Final = (
    "import sys, time\n"
    "for line in sys.stdin:\n"
    "    print('read %.6f' % time.monotonic(), flush=True)\n"
)


@dataclass(frozen=True)
class Options:
    server: tuple[str, ...]
    sends: int
    children: int
    idle_seconds: float


def is_turn_end(event: Json) -> bool:
    return event.get("type") == "turn" and event.get("phase") == "end"


def read_times(server: Server, run_id: str) -> list[float]:
    """The read times the child printed so far, in order (its `output` events' text)."""
    text = "".join(
        str(e.get("text", "")) for e in server.events.get(run_id, []) if e.get("type") == "output"
    )
    return [float(line.split()[1]) for line in text.splitlines() if line.startswith("read ")]


async def until(server: Server, ready: Callable[[], bool], what: str) -> None:
    """Wait for `ready()` to hold over the events received (or the server to fail)."""
    async with server.changed:
        await bounded(server.changed.wait_for(lambda: server.failure is not None or ready()), what)
    if server.failure is not None:
        raise server.failure


def turn_ends(server: Server, run_id: str) -> int:
    return sum(1 for e in server.events.get(run_id, []) if is_turn_end(e))


# --- 1. run/send latency ----------------------------------------------------------------


class Direct:
    """The same line program, started by this process: the baseline's far end."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.stdin = proc.stdin
        self.stdout = proc.stdout

    async def latency(self) -> float:
        """Seconds from just before a line is written to the moment the child read it."""
        sent = time.monotonic()
        self.stdin.write(b"hello\n")
        await self.stdin.drain()
        line = await bounded(self.stdout.readline(), "the direct child's answer")
        if not line.startswith(b"read "):
            raise BenchError(f"the direct child answered {line[:200]!r}")
        return float(line.split()[1]) - sent

    async def close(self) -> None:
        self.stdin.close()
        try:
            await bounded(self.proc.wait(), "the direct child's exit", 10.0)
        except BenchError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()  # the process this bench started
            await self.proc.wait()
            raise


async def send_latency(server: Server, run_id: str) -> tuple[float, float]:
    """One message to the waiting child: (request to its read, request to its reply)."""
    ended = turn_ends(server, run_id)
    read = len(read_times(server, run_id))
    sent = time.monotonic()
    round_trip, result = await timed_request(server, "run/send", {"runId": run_id, "text": "hi"})
    if result.get("state") != "delivered":
        raise BenchError(f"a message to a waiting child was not delivered: {result!r:.300}")
    await until(
        server,
        lambda: turn_ends(server, run_id) > ended and len(read_times(server, run_id)) > read,
        "the turn the message began to end",
    )
    return read_times(server, run_id)[read] - sent, round_trip


async def bench_send(server: Server, opts: Options) -> list[Row]:
    spawned = await request(
        server,
        "spawn",
        {
            "command": [sys.executable, "-u", "-c", READER],
            "interactive": True,
            "stream": True,
            "mode": "background",
        },
    )
    run_id = run_id_of(spawned)
    await until(server, lambda: child_running(server, run_id), "the interactive child to run")
    proc = await start_piped([sys.executable, "-u", "-c", READER], "the direct child", STREAM_LIMIT)
    direct = Direct(proc)
    sends: list[float] = []
    trips: list[float] = []
    straight: list[float] = []
    try:
        for i in range(WARMUP + opts.sends):
            latency, trip = await send_latency(server, run_id)
            baseline = await direct.latency()
            if i >= WARMUP:
                sends.append(latency)
                trips.append(trip)
                straight.append(baseline)
    finally:
        await direct.close()
    closed = await request(server, "run/close", {"runId": run_id})
    expect_status(closed, "completed", "the closed interactive run")
    pings = [(await timed_request(server, "ping", {}))[0] for _ in range(opts.sends)]
    detail(
        f"{opts.sends} messages: request to the child's read, median {ms(median(sends)):.3f} ms "
        f"(max {ms(max(sends)):.3f}); written straight to the child, median "
        f"{ms(median(straight)):.3f} ms; the server adds "
        f"{ms(median(sends) - median(straight)):.3f} ms"
    )
    value = ms(median(sends))
    return [
        Row(
            "send to the child's read, median",
            "ms",
            value,
            f"<= {TARGET_SEND_MS:g} ms",
            value <= TARGET_SEND_MS,
            ms(median(straight)),
        ),
        Row("run/send round trip, median", "ms", ms(median(trips)), "-", None, ms(median(pings))),
    ]


# --- 2. idle interactive children -------------------------------------------------------


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 1e6


def cpu_ns(pid: int) -> int:
    """On-CPU nanoseconds of every thread of `pid` so far (schedstat's first field)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total


async def idle_window(server: Server, seconds: float) -> tuple[float, float]:
    """The server's RSS (the larger of the window's ends) and its CPU in % of a core."""
    pid = server.proc.pid
    rss = rss_mb(pid)
    before = cpu_ns(pid)
    start = time.monotonic()
    # The measurement window itself: the server is left alone with its children.
    await asyncio.sleep(seconds)
    used = cpu_ns(pid) - before
    window = time.monotonic() - start
    return max(rss, rss_mb(pid)), 100.0 * used / 1e9 / window


async def spawn_waiting(server: Server) -> str:
    spawned = await request(
        server,
        "spawn",
        {"command": ["cat"], "prompt": "hello", "interactive": True, "mode": "background"},
    )
    return run_id_of(spawned)


async def spawn_sleeping(server: Server) -> str:
    spawned = await request(server, "spawn", {"command": ["sleep", "300"], "mode": "background"})
    return run_id_of(spawned)


def child_running(server: Server, run_id: str) -> bool:
    return any(
        e.get("type") == "child" and e.get("status") == "running"
        for e in server.events.get(run_id, [])
    )


async def close_all(server: Server, run_ids: Sequence[str]) -> None:
    closed = await asyncio.gather(
        *(request(server, "run/close", {"runId": run_id}) for run_id in run_ids)
    )
    for run_id, result in zip(run_ids, closed, strict=True):
        expect_status(result, "completed", f"the close of {run_id}")


async def stop_all(server: Server, run_ids: Sequence[str]) -> None:
    stopped = await asyncio.gather(
        *(request(server, "stop", {"runId": run_id, "graceMs": 0}) for run_id in run_ids)
    )
    for run_id, result in zip(run_ids, stopped, strict=True):
        expect_status(result, "cancelled", f"the stop of {run_id}")


async def bench_idle(server: Server, opts: Options) -> list[Row]:
    count = opts.children
    empty_rss, empty_cpu = await idle_window(server, opts.idle_seconds)
    waiting = [await spawn_waiting(server) for _ in range(count)]
    await until(
        server,
        lambda: all(turn_ends(server, run_id) >= 1 for run_id in waiting),
        f"the first turns of {count} children to end",
    )
    rss, cpu = await idle_window(server, opts.idle_seconds)
    await close_all(server, waiting)
    # The same count of one-shot children, running (asleep): what any running child
    # costs, so that what being interactive adds shows apart.
    sleeping = [await spawn_sleeping(server) for _ in range(count)]
    await until(
        server,
        lambda: all(child_running(server, run_id) for run_id in sleeping),
        f"{count} sleeping children to run",
    )
    plain_rss, plain_cpu = await idle_window(server, opts.idle_seconds)
    await stop_all(server, sleeping)
    detail(
        f"{count} waiting interactive children: RSS {rss:.1f} MB ({empty_rss:.1f} MB "
        f"without, {plain_rss:.1f} MB with {count} one-shot sleeping ones), "
        f"{(rss - empty_rss) * 1000 / count:.0f} kB a child; CPU {cpu:.3f} % of a core over "
        f"{opts.idle_seconds:g} s ({empty_cpu:.3f} % without, {plain_cpu:.3f} % with the "
        "sleeping ones)"
    )
    return [
        Row(
            f"RSS, {count} waiting children",
            "MB",
            rss,
            f"<= {TARGET_IDLE_RSS_MB:g} MB",
            rss <= TARGET_IDLE_RSS_MB,
            empty_rss,
        ),
        Row(f"RSS, vs {count} one-shot children", "MB", rss, "-", None, plain_rss),
        Row(
            f"idle CPU, {count} waiting children",
            "%",
            cpu,
            f"< {TARGET_IDLE_CPU_PCT:g} %",
            cpu < TARGET_IDLE_CPU_PCT,
            empty_cpu if empty_cpu > 0 else None,
        ),
        Row(
            f"idle CPU, vs {count} one-shot children",
            "%",
            cpu,
            "-",
            None,
            plain_cpu if plain_cpu > 0 else None,
        ),
    ]


# --- orchestration ----------------------------------------------------------------------


Bench = Callable[[Server, Options], Awaitable[list[Row]]]


async def section(title: str, opts: Options, extra: Sequence[str], bench: Bench) -> list[Row]:
    """One section on a fresh server; then no child of it may be left."""
    print(title, flush=True)
    problems: list[str] = []
    run_ids: set[str] = set()
    async with serving(opts.server, extra) as server:
        run_ids = server.run_ids
        try:
            rows = await bench(server, opts)
        finally:
            problems += await check_leftovers(run_ids, f"by '{title}' (server up)")
    problems += await check_leftovers(run_ids, f"by '{title}' (server closed)")
    if problems:
        raise BenchError("; ".join(problems))
    return rows


async def run(opts: Options) -> list[Row]:
    rows = await section("1. run/send latency", opts, (), bench_send)
    concurrency = ("--max-concurrency", str(opts.children))
    return rows + await section("2. idle interactive children", opts, concurrency, bench_idle)


def children_count(text: str) -> int:
    value = positive_int(text)
    if value > 256:  # --max-concurrency's bound
        raise argparse.ArgumentTypeError(f"at most 256, got {value}")
    return value


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sends", type=positive_int, default=200, metavar="N")
    parser.add_argument("--children", type=children_count, default=100, metavar="N")
    parser.add_argument("--idle-seconds", type=positive_float, default=20.0, metavar="S")
    parser.add_argument("--server", metavar="CMD", help="server command line to benchmark")
    args = parser.parse_args(argv)
    return Options(server_command(args.server), args.sends, args.children, args.idle_seconds)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        opts = parse_args(argv)
    except BenchError as exc:
        print(f"interactive bench failed: {exc}", file=sys.stderr)
        return 1
    return print_table_of("interactive", run(opts))


if __name__ == "__main__":
    raise SystemExit(main())
