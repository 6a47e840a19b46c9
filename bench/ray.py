"""Benchmark of the ray executor on a two-node cluster against the local executor.

What is measured
----------------
The bench starts its own two-node Ray cluster on this machine (a
`ray.cluster_utils.Cluster`, as tests/raycluster.py does: the head offers the
custom resource `head`, the second node `worker`, one CPU each unless
`--node-cpus` says more, a short RAY_TMPDIR, usage stats and token auth off)
and times its start. Its holder
process then measures Ray alone: N sequential actors (`num_cpus=0`, as the
executor's) each created, called once and killed, the part of a remote spawn
that is Ray's own (each actor is a worker process of its own). Every
measurement then runs twice, each time against a freshly started real server
(a throw-away `--state-dir`, `--max-concurrency` 100, answered one `ping`
before anything is timed): plain `subagent-host serve` (local) and
`subagent-host serve --executor ray --ray-address ADDR` (ray). A few untimed
spawns warm each server up first (the ray server opens its bridge, the Ray
driver, on its first child). The table's ratio is ray / local.

1. Spawn latency. N (50) sequential `spawn {"command": ["true"], "mode": "task"}`,
   each sent once the previous reply arrived: median and p95, write to reply.
2. Throughput. N (20) such spawns written at once; children per second from the
   first write to the last reply.
3. Streaming. One child `seq 1 M` (M = 4,000,000 lines, 31 MB: half a second
   locally, so the drain outweighs the start) spawned with `stream: true` in
   task mode; lines per second from the spawn's write to the `output` event
   that brought its last line, and the time to its first `output` event (the
   detail line adds the rate after that first event). The events' text joined
   must be exactly seq's output, in order. Goal: ray at least half of local.
4. 100 concurrent children. 100 background spawns of `sleep S` written at
   once (S = 60: long enough for all 100 to be running at once on the ray side,
   where each child's actor starts a Ray worker process of its own); on the ray
   server with `placement.resources` `{"head": 1}` and `{"worker": 1}`
   alternating (each node offers 100 of its resource, so the placement picks the
   node without limiting how many run there), on the local one without
   placement. Reported: the wall time from the first write to the last run's
   terminal `status` event, the most children running at once (from their
   `child` events) and how long after the first write that many were, and how
   many completed (all must); on the ray side, `status` of each run must show
   its child on the node its placement named.

Cleanliness checks
------------------
After each server exits, every process on the machine is scanned for a
`SUBAGENT_HOST_RUN_ID` the server reported. The bench puts a marker
(`SUBAGENT_HOST_CLUSTER_BENCH=<uuid>`) in its own environment, which the
cluster's processes (GCS, raylets, workers: the actors), the servers and their
bridges inherit; once the cluster is shut down, no process but the bench itself
may carry it. Anything found is reported as an error and killed by pid (psutil
checks the pid was not reused), never by name.
Last, the bench waits until no process it started is left (a Ray process still
ending, or its zombie), so it exits leaving nothing: what it started is its
descendants, looked at every 0.2 s while it runs and remembered by pid and start
time (bench/lineage.py), so an orphan handed to init still counts, and other jobs
of the shell that started it never do.

The bench never imports Ray: the cluster lives in a child process of its own,
started from the repository's root (this file, `bench.ray`, is not Ray). When
the server refuses `--executor ray` (a version without it, or Ray not
installed), the local figures are still printed, with the server's reason.

How to run
----------
    .venv/bin/python bench/ray.py [--spawns N] [--parallel N] [--lines M]
                                      [--concurrent N] [--sleep S] [--node-cpus N]
                                      [--server CMD]

Needs the ray extra (`pip install -e '.[ray]'`) for the cluster. Exits 0
whatever the figures; 1 on any protocol error, timeout, failed child, or
process left behind.
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
import dataclasses
import json
import os
import platform
import shlex
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

import psutil

from bench.common import BenchError, bounded, drain_stderr, start_piped
from bench.lineage import Lineage
from bench.runs import (
    Json,
    Row,
    Server,
    check_leftovers,
    detail,
    format_table,
    kill_leftovers,
    median,
    ms,
    p95,
    positive_float,
    positive_int,
    request,
    run_id_of,
    server_command,
    serving,
    status_problem,
    timed_request,
)

ROOT: Final = Path(__file__).resolve().parent.parent

from subagent_host.values import TERMINAL  # noqa: E402
from tests.raycluster import CLUSTER_ENVIRONMENT, HEAD_RESOURCE, WORKER_RESOURCE  # noqa: E402

MARKER_VAR: Final = "SUBAGENT_HOST_CLUSTER_BENCH"
CLUSTER_START_TIMEOUT_S: Final = 180.0
CLUSTER_STOP_TIMEOUT_S: Final = 60.0
# Ray's processes may take a moment to go once the raylets are gone.
SWEEP_TIMEOUT_S: Final = 30.0
SWEEP_POLL_S: Final = 0.2
WARMUP: Final = 5
MAX_CONCURRENCY: Final = 100
CLUSTER_LINE: Final = "CLUSTER "
# Remote streaming, from the spawn to the last line, at least half the local drain.
STREAMING_GOAL: Final = 0.5

# Runs in a child process: starts the two nodes (as tests/raycluster.py does, but
# with `amount` of each node's resource, so that many children fit on it at once),
# prints one line naming them, then holds the cluster until its stdin closes (the
# bench's end, or its death).
CLUSTER_HOLDER: Final = """
import json, sys, time
sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # run from bench/, ray.py is ours
import ray
from ray.cluster_utils import Cluster
head, worker = sys.argv[1], sys.argv[2]
amount, actors, cpus = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
began = time.perf_counter()
# No fixed ports (a test suite's cluster may run meanwhile).
head_args = {"num_cpus": cpus, "resources": {head: amount}, "include_dashboard": False,
             "dashboard_agent_listen_port": None}
cluster = Cluster(initialize_head=True, head_node_args=head_args)
try:
    second = cluster.add_node(num_cpus=cpus, resources={worker: amount})
    cluster.wait_for_nodes()
    startup = time.perf_counter() - began

    @ray.remote(num_cpus=0, max_restarts=0)
    class Empty:
        def ping(self):
            return 1

    # Ray alone: an actor (a worker process of its own) created, called once, killed.
    ray.init(address=cluster.address, log_to_driver=False)
    times = []
    for _ in range(actors):
        start = time.perf_counter()
        actor = Empty.remote()
        ray.get(actor.ping.remote())
        ray.kill(actor)
        times.append(time.perf_counter() - start)
    ray.shutdown()
    named = {"address": cluster.address, head: cluster.head_node.node_id,
             worker: second.node_id, "startup": startup, "actors": times}
    print("CLUSTER " + json.dumps(named), flush=True)
    sys.stdin.read()
finally:
    cluster.shutdown()
"""


@dataclass(frozen=True)
class Options:
    server: tuple[str, ...]
    spawns: int
    parallel: int
    lines: int
    concurrent: int
    sleep_s: float
    node_cpus: int


# --- the cluster ---------------------------------------------------------------------


@dataclass
class ClusterProcess:
    """The child process holding the two-node cluster, and what it said."""

    proc: asyncio.subprocess.Process
    address: str
    started_s: float
    # Seconds per Ray actor created, called once and killed (after a warm-up).
    actor_s: list[float]
    # The node id behind each custom resource: {"head": id, "worker": id}.
    nodes: dict[str, str] = field(default_factory=dict)
    tail: bytearray = field(default_factory=bytearray)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


async def read_named(stdout: asyncio.StreamReader) -> Json:
    """The holder's CLUSTER line (Ray may print other lines before it)."""
    while line := await stdout.readline():
        text = line.decode(errors="replace")
        if text.startswith(CLUSTER_LINE):
            named: Json = json.loads(text[len(CLUSTER_LINE) :])
            return named
    raise BenchError("the cluster process ended before naming its nodes")


async def drain_stdout(stdout: asyncio.StreamReader, tail: bytearray) -> None:
    while line := await stdout.readline():
        tail += line
        del tail[:-4096]


async def start_cluster(opts: Options, temp_dir: str) -> ClusterProcess:
    began = time.perf_counter()
    argv = [sys.executable, "-c", CLUSTER_HOLDER, HEAD_RESOURCE, WORKER_RESOURCE]
    argv += [str(opts.concurrent), str(WARMUP + opts.spawns), str(opts.node_cpus)]
    proc = await start_piped(argv, "the cluster", 1024 * 1024)
    assert proc.stdout is not None and proc.stderr is not None
    tail = bytearray()
    stderr_task = asyncio.create_task(drain_stderr(proc.stderr, tail))
    try:
        named = await bounded(read_named(proc.stdout), "starting", CLUSTER_START_TIMEOUT_S)
    except BenchError as exc:
        await stop_cluster(ClusterProcess(proc, "", 0.0, [], {}, tail, [stderr_task]))
        raise BenchError(f"{exc}; cluster stderr: {tail.decode(errors='replace')}") from None
    spent = time.perf_counter() - began
    started_s = float(named["startup"])
    actor_s = [float(t) for t in named["actors"]][WARMUP:]
    nodes = {name: str(named[name]) for name in (HEAD_RESOURCE, WORKER_RESOURCE)}
    address = str(named["address"])
    cluster = ClusterProcess(proc, address, started_s, actor_s, nodes, tail, [stderr_task])
    cluster.tasks.append(asyncio.create_task(drain_stdout(proc.stdout, tail)))
    detail(
        f"cluster at {address} up in {started_s:.1f} s: head {nodes[HEAD_RESOURCE]:.12}…, "
        f"worker {nodes[WORKER_RESOURCE]:.12}…, RAY_TMPDIR {temp_dir}"
    )
    detail(
        f"Ray alone: {len(actor_s)} actors created, called, killed: median "
        f"{ms(median(actor_s)):.1f} ms, p95 {ms(p95(actor_s)):.1f} ms "
        f"({spent:.1f} s from the holder's start to here)"
    )
    return cluster


async def stop_cluster(cluster: ClusterProcess) -> float:
    """Close the holder's stdin (it shuts the cluster down); seconds it took."""
    began = time.perf_counter()
    assert cluster.proc.stdin is not None
    cluster.proc.stdin.close()
    try:
        await bounded(cluster.proc.wait(), "shutting the cluster down", CLUSTER_STOP_TIMEOUT_S)
    finally:
        if cluster.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                cluster.proc.kill()
            await bounded(cluster.proc.wait(), "waiting for the killed cluster process")
        await asyncio.wait(cluster.tasks, timeout=CLUSTER_STOP_TIMEOUT_S)
    return time.perf_counter() - began


def marked(marker: str) -> list[psutil.Process]:
    """Live processes but this one whose environment carries the bench's marker."""
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid() or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(MARKER_VAR) == marker:
                found.append(proc)
        except psutil.Error:
            continue
    return found


async def sweep_marker(marker: str) -> tuple[int, list[str]]:
    """Wait (bounded) until nothing carries the marker; kill and report what stays.

    Returns how many marked processes were alive at the first look, and the problems.
    """
    first = len(await asyncio.to_thread(marked, marker))
    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    while left := await asyncio.to_thread(marked, marker):
        if time.monotonic() >= deadline:
            killed = await asyncio.to_thread(kill_leftovers, left)
            return first, [
                f"carried the bench's marker after clean-up, killed: {k}" for k in killed
            ]
        await asyncio.sleep(SWEEP_POLL_S)  # Ray's processes ending on their own: nothing to await
    return first, []


async def lineage_cleared(lineage: Lineage) -> list[str]:
    """Wait (bounded) until nothing this bench started is left (a Ray process ending after
    the cluster's shutdown, or its zombie not yet reaped): it exits leaving nothing behind,
    whatever carried its marker or not. Other processes of its session (the shell's other
    jobs) are not its, and are not waited for."""
    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    while left := await asyncio.to_thread(lineage.alive):
        if time.monotonic() >= deadline:
            return [f"left by the bench: {left}"]
        await asyncio.sleep(SWEEP_POLL_S)  # other processes' ends: nothing to await
    return []


# --- the two servers -----------------------------------------------------------------


@dataclass
class Side:
    """One executor: its server options, or why it cannot run here."""

    name: str
    args: tuple[str, ...]
    unavailable: str | None = None


@dataclass
class Context:
    opts: Options
    local: Side
    ray: Side
    nodes: dict[str, str]
    problems: list[str] = field(default_factory=list)


@asynccontextmanager
async def server_of(ctx: Context, side: Side) -> AsyncIterator[Server]:
    """A fresh server of `side`; once it exited, nothing of its runs may be left."""
    current: Server | None = None
    try:
        async with serving(ctx.opts.server, side.args) as server:
            current = server
            yield server
    finally:
        if current is not None:
            ctx.problems += current.problems
            ctx.problems += await check_leftovers(current.run_ids, f"by the {side.name} server")


async def probe(ctx: Context, side: Side) -> None:
    """Start `side`'s server once; a refusal marks it unavailable with its reason."""
    try:
        async with server_of(ctx, side):
            pass
    except BenchError as exc:
        side.unavailable = str(exc)
        detail(f"{side.name} server unavailable: {exc}")


Measure = Callable[[Server, Side, Context], Awaitable[dict[str, float]]]


async def measure_both(ctx: Context, measure: Measure) -> tuple[dict[str, float], dict[str, float]]:
    """`measure` on a fresh local server, then on a fresh ray server ({} if unavailable)."""
    figures: list[dict[str, float]] = []
    for side in (ctx.local, ctx.ray):
        if side.unavailable is not None:
            figures.append({})
            continue
        async with server_of(ctx, side) as server:
            figures.append(await measure(server, side, ctx))
    return figures[0], figures[1]


def with_goal(row: Row, minimum: float) -> Row:
    """The row with a target ratio (ray / local) and whether it was met."""
    if row.ratio is None:
        return row
    return dataclasses.replace(row, target=f"ratio >= {minimum:g}", met=row.ratio >= minimum)


def compare(name: str, unit: str, key: str, local: dict[str, float], ray: dict[str, float]) -> Row:
    """Ray's figure against local's; the local figure alone when ray did not run."""
    if key not in ray:
        return Row(name, unit, local[key], "local only", None)
    value, base = ray[key], local[key]
    # The ratio column rounds a far smaller figure to 0.00: say how many times.
    note = f"ray 1/{base / value:,.0f}" if 0 < value < base / 10 else "-"
    return Row(name, unit, value, note, None, base)


# --- 1 and 2. spawn latency and throughput -------------------------------------------


async def spawn_true(server: Server) -> float:
    elapsed, result = await timed_request(server, "spawn", {"command": ["true"], "mode": "task"})
    problem = status_problem(result, "completed", "spawn of `true`")
    if problem is not None:  # a wrong answer, yet still an answer: keep timing
        server.problems.append(problem)
    return elapsed


async def warm_up(server: Server) -> None:
    for _ in range(WARMUP):
        await spawn_true(server)


async def measure_latency(server: Server, side: Side, ctx: Context) -> dict[str, float]:
    await warm_up(server)
    times = [await spawn_true(server) for _ in range(ctx.opts.spawns)]
    detail(
        f"{side.name}: {ctx.opts.spawns} sequential spawns, median {ms(median(times)):.2f} ms, "
        f"p95 {ms(p95(times)):.2f} ms, max {ms(max(times)):.2f} ms"
    )
    return {"median": ms(median(times)), "p95": ms(p95(times))}


async def measure_throughput(server: Server, side: Side, ctx: Context) -> dict[str, float]:
    await warm_up(server)
    began = time.perf_counter()
    await asyncio.gather(*(spawn_true(server) for _ in range(ctx.opts.parallel)))
    wall = time.perf_counter() - began
    rate = ctx.opts.parallel / wall
    detail(f"{side.name}: {ctx.opts.parallel} parallel spawns in {wall:.3f} s = {rate:.1f}/s")
    return {"rate": rate}


# --- 3. streaming --------------------------------------------------------------------


def seq_output(lines: int) -> str:
    return "".join(f"{i}\n" for i in range(1, lines + 1))


async def measure_streaming(server: Server, side: Side, ctx: Context) -> dict[str, float]:
    await warm_up(server)
    expected = seq_output(ctx.opts.lines)
    params: Json = {"command": ["seq", "1", str(ctx.opts.lines)], "mode": "task", "stream": True}
    began = time.perf_counter()
    result = await request(server, "spawn", params)
    replied = time.perf_counter() - began
    problem = status_problem(result, "completed", "the seq child")
    if problem is not None:
        raise BenchError(problem)
    run_id = run_id_of(result)

    def streamed() -> list[Json]:
        return [e for e in server.events.get(run_id, []) if e.get("type") == "output"]

    def text() -> str:
        return "".join(str(e.get("text", "")) for e in streamed())

    async with server.changed:
        await bounded(
            server.changed.wait_for(lambda: len(text()) >= len(expected)),
            "waiting for the last output event",
        )
    if text() != expected:
        raise BenchError(f"{side.name}: the streamed text is not seq's output, in order")
    events = streamed()
    first = float(events[0]["_received"]) - began
    elapsed = float(events[-1]["_received"]) - began
    rate = ctx.opts.lines / elapsed
    # Once output flows: what followed the first event, over the time it took.
    after = ctx.opts.lines - str(events[0].get("text", "")).count("\n")
    flowing = f"{after / (elapsed - first):,.0f} lines/s" if elapsed > first else "-"
    detail(
        f"{side.name}: {ctx.opts.lines:,} lines in {len(events):,} output events; first "
        f"after {ms(first):.1f} ms, last after {elapsed:.3f} s (reply after {replied:.3f} s): "
        f"{rate:,.0f} lines/s from the spawn, {flowing} after the first event"
    )
    return {"rate": rate / 1000.0, "first": ms(first)}


# --- 4. 100 concurrent children ------------------------------------------------------


def is_run_terminal(event: Json) -> bool:
    return event.get("type") == "status" and event.get("status") in TERMINAL


def peak_running(events: Sequence[Json]) -> tuple[int, float]:
    """The most children running at once, from `child` events (in arrival order), and
    when that many first were."""
    changes = sorted(
        (float(e["_received"]), 1 if e.get("status") == "running" else -1)
        for e in events
        if e.get("type") == "child" and e.get("status") in {"running", *TERMINAL}
    )
    running = peak = 0
    reached = 0.0
    for at, step in changes:
        running += step
        if running > peak:
            peak, reached = running, at
    return peak, reached


def resource_of(index: int) -> str:
    return HEAD_RESOURCE if index % 2 == 0 else WORKER_RESOURCE


def placement_of(side: Side, index: int) -> Json | None:
    if side.name != "ray":
        return None
    return {"resources": {resource_of(index): 1}}


async def check_nodes(server: Server, run_ids: Sequence[str], ctx: Context) -> None:
    """Each child ran on the node its placement named (its snapshot's `node`)."""
    snapshots = await asyncio.gather(*(request(server, "status", {"runId": r}) for r in run_ids))
    wrong = 0
    for index, snapshot in enumerate(snapshots):
        children = snapshot.get("children") or [{}]
        if children[0].get("node") != ctx.nodes[resource_of(index)]:
            wrong += 1
    if wrong:
        server.problems.append(f"ray: {wrong}/{len(run_ids)} children ran on another node")
    detail(f"ray: {len(run_ids) - wrong}/{len(run_ids)} children ran on the node they asked for")


async def measure_concurrent(server: Server, side: Side, ctx: Context) -> dict[str, float]:
    await warm_up(server)
    count = ctx.opts.concurrent
    command = ["sleep", f"{ctx.opts.sleep_s:g}"]

    async def spawn(index: int) -> str:
        params: Json = {"command": command}
        placement = placement_of(side, index)
        if placement is not None:
            params["placement"] = placement
        return run_id_of(await request(server, "spawn", params))

    began = time.perf_counter()
    run_ids = await asyncio.gather(*(spawn(i) for i in range(count)))

    def ended() -> list[Json]:
        return [e for r in run_ids for e in server.events.get(r, []) if is_run_terminal(e)]

    async with server.changed:
        await bounded(
            server.changed.wait_for(lambda: len(ended()) >= count),
            f"waiting for {count} children to end",
        )
    finals = ended()
    wall = max(float(e["_received"]) for e in finals) - began
    completed = sum(1 for e in finals if e.get("status") == "completed")
    if completed != count:
        statuses = sorted({str(e.get("status")) for e in finals})
        server.problems.append(f"{side.name}: {completed}/{count} completed ({statuses})")
    if side.name == "ray":
        await check_nodes(server, run_ids, ctx)
    peak, reached = peak_running([e for r in run_ids for e in server.events.get(r, [])])
    ramp = reached - began
    placed = "alternating head/worker" if side.name == "ray" else "no placement"
    detail(
        f"{side.name}: {count} x `{shlex.join(command)}` ({placed}): {completed} completed, "
        f"wall {wall:.2f} s, at most {peak} running at once ({ramp:.2f} s after the first spawn)"
    )
    return {"wall": wall, "peak": float(peak), "ramp": ramp, "completed": float(completed)}


# --- orchestration -------------------------------------------------------------------


async def measure_all(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    print("1. spawn latency", flush=True)
    local, ray = await measure_both(ctx, measure_latency)
    rows.append(compare("spawn latency, median", "ms", "median", local, ray))
    rows.append(compare("spawn latency, p95", "ms", "p95", local, ray))
    print("2. throughput", flush=True)
    local, ray = await measure_both(ctx, measure_throughput)
    rows.append(compare(f"{ctx.opts.parallel} parallel spawns", "/s", "rate", local, ray))
    print("3. streaming", flush=True)
    local, ray = await measure_both(ctx, measure_streaming)
    streamed = compare(f"stream {ctx.opts.lines:,} lines", "klines/s", "rate", local, ray)
    rows.append(with_goal(streamed, STREAMING_GOAL))
    rows.append(compare("stream, first output event", "ms", "first", local, ray))
    print(f"4. {ctx.opts.concurrent} concurrent children", flush=True)
    local, ray = await measure_both(ctx, measure_concurrent)
    rows.append(compare(f"{ctx.opts.concurrent} children, wall", "s", "wall", local, ray))
    rows.append(compare(f"{ctx.opts.concurrent} children, most at once", "", "peak", local, ray))
    rows.append(compare(f"{ctx.opts.concurrent} children, to the most", "s", "ramp", local, ray))
    rows.append(compare(f"{ctx.opts.concurrent} children, completed", "", "completed", local, ray))
    return rows


def sides(cluster: ClusterProcess | None) -> tuple[Side, Side]:
    common = ("--max-concurrency", str(MAX_CONCURRENCY))
    local = Side("local", common)
    if cluster is None:
        return local, Side("ray", (), "no cluster")
    return local, Side("ray", ("--executor", "ray", "--ray-address", cluster.address, *common))


async def run(opts: Options) -> int:
    print(
        f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: nproc={os.cpu_count()} "
        f"python={platform.python_version()} {platform.system()} {platform.machine()}\n"
        f"server: {shlex.join(opts.server)}",
        flush=True,
    )
    marker = uuid.uuid4().hex
    # Ray's environment (tests/raycluster.py's) and a short temporary directory: Unix
    # socket paths are limited to 107 bytes. Inherited by the cluster and the servers.
    temp_dir = tempfile.mkdtemp(prefix="rb", dir="/tmp")
    os.environ.update({**CLUSTER_ENVIRONMENT, "RAY_TMPDIR": temp_dir, MARKER_VAR: marker})
    rows: list[Row] = []
    problems: list[str] = []
    failure: BenchError | None = None
    cluster: ClusterProcess | None = None
    lineage = Lineage()
    watching = asyncio.create_task(lineage.watch(SWEEP_POLL_S))
    try:
        print("0. cluster", flush=True)
        cluster = await start_cluster(opts, temp_dir)
        # The sweep at the end can only prove something if the marker reached Ray.
        up = len(await asyncio.to_thread(marked, marker))
        detail(f"{up} processes carry the bench's marker with the cluster up")
        local, ray = sides(cluster)
        ctx = Context(opts, local, ray, cluster.nodes, problems)
        await probe(ctx, ray)
        rows += await measure_all(ctx)
    except BenchError as exc:
        failure = exc
    finally:
        if cluster is not None:
            try:
                stop_s = await stop_cluster(cluster)
                detail(f"cluster shut down in {stop_s:.1f} s")
            except BenchError as exc:
                problems.append(str(exc))
        seen, left = await sweep_marker(marker)
        problems += left
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        problems += await lineage_cleared(lineage)
        detail(f"marker sweep: {seen} marked processes at the first look, {len(left)} left")
        rows.append(Row("marked processes left", "", float(len(left)), "0", not left))
        shutil.rmtree(temp_dir, ignore_errors=True)
    if cluster is not None:
        rows[:0] = [
            Row("cluster start (2 nodes)", "s", cluster.started_s, "-", None),
            Row("Ray alone: actor start, median", "ms", ms(median(cluster.actor_s)), "-", None),
        ]
    print("\n".join(["", "ratio = ray / local", *format_table(rows)]))
    for problem in problems:
        print(f"cluster bench: ERROR: {problem}", file=sys.stderr)
    if failure is not None:
        print(f"cluster bench: FAILED: {failure}", file=sys.stderr)
    return 1 if failure is not None or problems else 0


# --- command line --------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--spawns", type=positive_int, default=50, metavar="N")
    parser.add_argument("--parallel", type=positive_int, default=20, metavar="N")
    parser.add_argument("--lines", type=positive_int, default=4_000_000, metavar="M")
    parser.add_argument("--concurrent", type=positive_int, default=MAX_CONCURRENCY, metavar="N")
    parser.add_argument("--sleep", type=positive_float, default=60.0, metavar="S")
    parser.add_argument(
        "--node-cpus",
        type=positive_int,
        default=1,
        metavar="N",
        help="CPUs each node offers (default: 1, as the tests' cluster); a raylet starts "
        "at most min(N, cores) Ray worker processes at once",
    )
    parser.add_argument("--server", metavar="CMD", help="server command line to benchmark")
    args = parser.parse_args(argv)
    if args.concurrent > MAX_CONCURRENCY or args.parallel > MAX_CONCURRENCY:
        parser.error(f"--concurrent and --parallel are at most {MAX_CONCURRENCY}")
    return Options(
        server=server_command(args.server),
        spawns=args.spawns,
        parallel=args.parallel,
        lines=args.lines,
        concurrent=args.concurrent,
        sleep_s=args.sleep,
        node_cpus=args.node_cpus,
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return asyncio.run(run(parse_args(argv)))
    except BenchError as exc:
        print(f"cluster bench: FAILED: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
