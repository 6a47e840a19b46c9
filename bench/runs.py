"""Benchmark of runs in the installed subagent-host: spawn, output drain, stop, idle.

What is measured
----------------
Four measurements (the second in two parts), each against its own freshly
started server (NDJSON framing, a throw-away `--state-dir`), answered one `ping`
before anything is timed so no measurement includes the server's start-up.
Every request is timed from its write to the arrival of the reply with its id;
`run/event` notifications arriving in between are recorded by run id, so a
reply is never mistaken for an event.

1. Spawn latency. N (200) sequential `spawn {"command": ["true"], "mode": "task"}`
   requests, each sent once the previous reply arrived. Baseline: N sequential
   `subprocess.run(["true"])` in this process (timed inside a worker thread, so
   the event loop adds nothing). Both sides are warmed up with a few untimed
   calls. Median and p95 of each. Target: median server / median baseline <= 3 (stretch: 2).
   For reference, N `ping` round trips on the same connection: the share of a
   spawn's latency that is the request and reply themselves.
   What process tracking costs per spawn: the same N spawns on a server forced
   to `--process-tracking subreaper`, then `marker`; each row compares the
   section-1 server's median (its mode, `auto`, as `ping` reports it: `cgroup`
   where a writable cgroup v2 hierarchy exists) with that mode's. A child placed
   in a cgroup is forked inside it by a server whose own cgroup is above the
   children's, else started through a `/bin/sh` trampoline that enters the cgroup
   and execs the program, and its cgroup is made and removed.
2. Output drain. One child writes 200 MiB to stdout in 64 KiB chunks (lines of
   1 KiB) in `mode: "task"`; the reply's `output.bytes` must be exactly 200 MiB.
   Baseline: the same writer connected by a pipe to `cat > /dev/null`, timed from
   start to the exit of both. After one warm-up spawn, server and baseline
   alternate (5 times by default) and the medians are compared. Target: ratio <= 1.5,
   and the server's peak RSS (VmHWM from /proc/<pid>/status, read after the
   replies) < 100 MB (decimal MB).
2b. Output without newlines. 200 MiB once as lines of 1 KiB and once without
   a single newline, on a server of its own, from three pairs of writers: the
   writer above (64 KiB writes); a coreutils pipeline (`yes` lines of 1 KiB
   through `head -c` and `tr`, whose 8 KiB writes reach the server as small
   reads; `tr 0 x` keeps the newlines, `tr '0\n' xx` turns them into `x` too);
   and `yes | head -c` against `head -c /dev/zero | tr '\0' x`, two different
   writers (the second is the slower even into `cat`). Each spawn is timed from
   its write to its reply, with the CPU time of the server's event loop (its
   main thread, /proc/<pid>/task/<pid>/schedstat) meanwhile and its peak RSS
   (VmHWM, reset through /proc/<pid>/clear_refs before the spawn); the reply's
   `output.bytes` and `output.lines` must be exact; then the same writer is
   timed into `cat > /dev/null`. Lines and no newlines alternate (5
   times by default). Target, for each pair: median without newlines / median
   of lines <= 1.25 through the server, times the same ratio into `cat` where
   that is over 1 (what the writers themselves differ by); the peak RSS of
   either < 100 MB. Then the components alone, in this process: a command
   child's output parser, and an agent child's line reader (lines of one JSON
   event each), fed the same 200 MiB in chunks of 8 KiB (a small read) and of
   256 KiB (the largest read), best of 5; target ratio <= 1.25.
2c. Redaction. What redacting a child's output costs (protocol.md §12.1), on a
   server of its own: the 200 MiB of section 2 as lines of 1 KiB, spawned with
   `redact: false` and no secret in the environment (nothing is redacted: the
   baseline) and then with redaction on and one secret (`API_TOKEN`, 40
   characters) in `env`, alternating (5 times by default), medians compared,
   with the server loop's CPU. Two contents: text (words and spaces: nothing
   matches, what almost all output is), and section 2's own lines of `x`, each a
   base64-like run of 1023 characters. Only what is kept is redacted (the head
   of a command's stdout; the rest is counted): target for both, ratio <= 1.10.
   Then what redacting every byte costs (a streamed child's output is all sent,
   so all redacted): the redactor alone, in this process, fed the same 200 MiB
   in chunks of 256 KiB, against the command parser fed the same (best of 5),
   for both contents; reported, no target.
3. Stop latency. A 20-process tree (`tests/fakes/tree.py 20`) spawned in the
   background with `stream: true`; once its first `output` event ("ready": all
   20 processes exist) arrives, `stop` is timed; its reply must say `cancelled`.
   (a) A tree that honours SIGTERM, 10 times: median <= 100 ms.
   (b) A tree that ignores SIGTERM (`--ignore-term`), stopped with
   `graceMs: 1000`, 5 times: median <= grace + 150 ms = 1150 ms.
4. Idle cost. 8 background `sleep 30` children (the server started with
   `--max-concurrency 8`); once a `child` event says each one is running, the
   server's own CPU time (user + system, its children excluded) over a 5 s
   window, as % of one core. Target < 2 %. The 8 runs are then stopped.

Cleanliness checks
------------------
After each section, while its server still runs and again once it has exited,
every process on the machine is scanned for a `SUBAGENT_HOST_RUN_ID` equal to a
run id the section saw (zombies and unreadable processes are skipped). Any found
is reported as an error and killed by pid (only those).

How to run
----------
    .venv/bin/python bench/runs.py [--spawns N] [--drain-mib N] [--drain-repeat N]
                                   [--stops N] [--stops-ignore-term N]
                                   [--idle-seconds S] [--server CMD] [--only N ...]

`--only` runs the sections whose titles start with the given numbers (`--only 2 2c`:
sections 2 and 2c; `2` alone does not take 2b or 2c).

`--server` takes a command line (split like a shell would, without a shell);
by default the `subagent-host` next to the running interpreter is used, else
the one on PATH. Exits 0 whether or not the targets are met; 1 on any protocol
error, timeout, misbehaving server process or child left behind.
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
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import psutil

from bench.common import BenchError, bounded, drain_stderr, start_piped
from subagent_host.backends.command import CommandParser
from subagent_host.backends.jsonlines import JsonLines
from subagent_host.backends.redaction import Redaction, StreamRedactor

Json = dict[str, Any]

# A server must exit this soon after its stdin is closed, or it is killed. It may
# have background runs to stop first (SIGTERM, its default 5 s grace, SIGKILL).
EXIT_TIMEOUT_S: Final = 15.0
STREAM_LIMIT: Final = 16 * 1024 * 1024
RUN_ID_VAR: Final = "SUBAGENT_HOST_RUN_ID"
TREE_SCRIPT: Final = Path(__file__).resolve().parent.parent / "tests" / "fakes" / "tree.py"
TREE_SIZE: Final = 20
SPAWN_WARMUP: Final = 10
STOP_GRACE_MS: Final = 1000
IDLE_CHILDREN: Final = 8

TARGET_SPAWN_RATIO: Final = 3.0
TARGET_DRAIN_RATIO: Final = 1.5
TARGET_FLAT_RATIO: Final = 1.25
TARGET_REDACTION_RATIO: Final = 1.10
REDACTION_SECRET: Final = "sk-bench-" + "0123456789abcdef" * 2 + "0123456"  # 40 characters
TARGET_PEAK_RSS_MB: Final = 100.0
TARGET_STOP_MS: Final = 100.0
TARGET_STOP_IGNORED_MS: Final = STOP_GRACE_MS + 150.0
TARGET_IDLE_CPU_PCT: Final = 2.0

# Writes int(argv[1]) chunks of 64 KiB to stdout: 64 lines of 1 KiB each, or
# with argv[2] == "flat" no newline at all; with argv[2] == "text", lines of words.
WRITER: Final = """
import sys
flat = sys.argv[2:] == ["flat"]
line = b"x" * 1023
if sys.argv[2:] == ["text"]:
    line = (b"the quick brown fox jumps over the lazy dog " * 24)[:1023]
chunk = b"x" * 65536 if flat else (line + b"\\n") * 64
out = sys.stdout.buffer
for _ in range(int(sys.argv[1])):
    out.write(chunk)
out.flush()
"""
WRITER_CHUNK: Final = 64 * 1024


# --- the server and its messages -----------------------------------------------------


@dataclass
class Server:
    """One running server process and the client's view of it."""

    proc: asyncio.subprocess.Process
    stdin: asyncio.StreamWriter
    stdout: asyncio.StreamReader
    stderr_tail: bytearray = field(default_factory=bytearray)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    pending: dict[int, asyncio.Future[Json]] = field(default_factory=dict)
    events: dict[str, list[Json]] = field(default_factory=dict)
    run_ids: set[str] = field(default_factory=set)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    failure: BenchError | None = None
    # Wrong answers that do not stop the measurement; they still fail the run.
    problems: list[str] = field(default_factory=list)
    closing: bool = False
    next_id: int = 1

    def describe(self) -> str:
        tail = self.stderr_tail.decode(errors="replace").strip()
        return f"server pid {self.proc.pid}; stderr tail: {tail or '(empty)'}"

    def fail(self, error: BenchError) -> None:
        """Record the first failure and hand it to every request still waiting."""
        if self.failure is None:
            self.failure = error
        for future in self.pending.values():
            if not future.done():
                future.set_exception(self.failure)
        self.pending.clear()


def record_event(server: Server, params: object) -> None:
    if not isinstance(params, dict) or not isinstance(params.get("runId"), str):
        raise BenchError(f"run/event without a runId: {params!r:.300}")
    server.run_ids.add(params["runId"])
    # When it arrived, for benchmarks that time events (never sent by the server).
    server.events.setdefault(params["runId"], []).append(
        {**params, "_received": time.perf_counter()}
    )


def resolve_reply(server: Server, msg: Json) -> None:
    msg_id = msg.get("id")
    future = server.pending.pop(msg_id, None) if type(msg_id) is int else None
    if future is None:
        raise BenchError(f"reply to an id nobody is waiting for: {msg!r:.300}")
    result = msg.get("result")
    if "error" in msg:
        future.set_exception(BenchError(f"request {msg_id} failed: {msg['error']!r:.500}"))
    elif not isinstance(result, dict):
        future.set_exception(BenchError(f"reply without an object result: {msg!r:.300}"))
    else:
        if isinstance(result.get("runId"), str):
            server.run_ids.add(result["runId"])
        future.set_result(result)


def dispatch(server: Server, line: bytes) -> None:
    """Route one message: a reply to its waiting request, a run/event to its run."""
    try:
        msg: object = json.loads(line)
    except ValueError as exc:
        raise BenchError(f"message is not JSON ({exc}): {line[:200]!r}") from None
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        raise BenchError(f"not a JSON-RPC 2.0 object: {line[:300]!r}")
    if "method" not in msg:
        resolve_reply(server, msg)
    elif "id" in msg:
        raise BenchError(f"unexpected request from the server: {line[:300]!r}")
    elif msg["method"] == "run/event":
        record_event(server, msg.get("params"))


async def read_messages(server: Server) -> None:
    """Read stdout to EOF, dispatching every message; a problem fails the server."""
    try:
        while line := await server.stdout.readline():
            if not line.endswith(b"\n"):
                raise BenchError(f"stdout ended inside a message: {line[:200]!r}")
            if line.strip():
                dispatch(server, line)
                async with server.changed:
                    server.changed.notify_all()
        if not server.closing or server.pending:
            raise BenchError("the server closed its stdout unasked")
    except (ValueError, asyncio.LimitOverrunError) as exc:
        server.fail(BenchError(f"message too large or malformed ({exc}): {server.describe()}"))
    except BenchError as exc:
        server.fail(BenchError(f"{exc}: {server.describe()}"))
    finally:
        async with server.changed:
            server.changed.notify_all()


async def write_line(server: Server, msg: Json) -> None:
    try:
        server.stdin.write(json.dumps(msg).encode() + b"\n")
        await server.stdin.drain()
    except (BrokenPipeError, ConnectionResetError) as exc:
        raise BenchError(f"cannot write to the server ({exc}): {server.describe()}") from None


async def request(server: Server, method: str, params: Json) -> Json:
    """Send one request and return the `result` of its reply (an error is a BenchError)."""
    if server.failure is not None:
        raise server.failure
    msg_id = server.next_id
    server.next_id += 1
    future: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
    server.pending[msg_id] = future
    await write_line(server, {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await bounded(future, f"waiting for the reply to {method} (id {msg_id})")


async def timed_request(server: Server, method: str, params: Json) -> tuple[float, Json]:
    """`request`, and the seconds from its write to its reply."""
    start = time.perf_counter()
    result = await request(server, method, params)
    return time.perf_counter() - start, result


async def wait_event(server: Server, run_id: str, match: Callable[[Json], bool], what: str) -> Json:
    """The first event of `run_id` (already received or still to come) that matches."""

    def found() -> Json | None:
        return next((e for e in server.events.get(run_id, []) if match(e)), None)

    async with server.changed:
        await bounded(
            server.changed.wait_for(lambda: server.failure is not None or found() is not None),
            what,
        )
    event = found()
    if event is None:
        assert server.failure is not None
        raise server.failure
    return event


def run_id_of(result: Json) -> str:
    run_id = result.get("runId")
    if not isinstance(run_id, str):
        raise BenchError(f"spawn result without a runId: {result!r:.300}")
    return run_id


def status_problem(result: Json, status: str, what: str) -> str | None:
    """Why `result` is not in `status` (with the run's error, if any), or None."""
    if result.get("status") == status:
        return None
    error = f"; error: {result['error']!r:.300}" if "error" in result else ""
    return f"{what} (run {result.get('runId')}): status {result.get('status')!r}{error}"


def expect_status(result: Json, status: str, what: str) -> None:
    problem = status_problem(result, status, what)
    if problem is not None:
        raise BenchError(f"{problem}, expected {status!r}")


# --- server lifecycle ----------------------------------------------------------------


async def start_server(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Server:
    proc = await start_piped(argv, "the server", STREAM_LIMIT, env)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    server = Server(proc, proc.stdin, proc.stdout)
    server.tasks.append(asyncio.create_task(drain_stderr(proc.stderr, server.stderr_tail)))
    server.tasks.append(asyncio.create_task(read_messages(server)))
    return server


async def close_server(server: Server) -> str | None:
    """Close stdin, await exit (kill our own pid after EXIT_TIMEOUT_S); return a problem."""
    server.closing = True
    problems: list[str] = []
    server.stdin.close()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        await bounded(server.stdin.wait_closed(), "closing the server's stdin")
    try:
        await bounded(server.proc.wait(), "waiting for exit after EOF", EXIT_TIMEOUT_S)
    except BenchError as exc:
        problems.append(f"{exc}; killed")
        with contextlib.suppress(ProcessLookupError):
            server.proc.kill()
        await bounded(server.proc.wait(), "waiting for the killed server")
    await asyncio.wait(server.tasks, timeout=EXIT_TIMEOUT_S)
    for task in server.tasks:
        task.cancel()
    if server.proc.returncode != 0 and not problems:
        problems.append(f"exited with status {server.proc.returncode}")
    return f"{'; '.join(problems)}: {server.describe()}" if problems else None


async def wait_ready(server: Server) -> None:
    """One `ping`: no measurement includes the server's own start-up."""
    result = await request(server, "ping", {})
    if result.get("pong") is not True:
        raise BenchError(f"not a pong: {result!r:.300}")


@asynccontextmanager
async def serving(base_argv: Sequence[str], extra: Sequence[str]) -> AsyncIterator[Server]:
    """A fresh server with its own state directory, always closed on the way out."""
    with tempfile.TemporaryDirectory(prefix="runs-bench-") as state_dir:
        server = await start_server([*base_argv, "--state-dir", state_dir, *extra])
        try:
            await wait_ready(server)
            yield server
        except BaseException:
            problem = await close_server(server)
            if problem:
                print(f"runs bench: while failing, also: {problem}", file=sys.stderr)
            raise
        problem = await close_server(server)
        if problem:
            raise BenchError(problem)


# --- processes left behind -----------------------------------------------------------


def scan_leftovers(run_ids: frozenset[str]) -> list[psutil.Process]:
    """Live processes whose environment carries one of `run_ids`."""
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(RUN_ID_VAR) in run_ids:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def kill_leftovers(procs: Sequence[psutil.Process]) -> list[str]:
    """Kill each one by pid (psutil checks the pid was not reused); describe them."""
    described: list[str] = []
    for proc in procs:
        try:
            what = f"pid {proc.pid} {shlex.join(proc.cmdline())[:120]}"
            proc.kill()
        except psutil.Error as exc:
            what = f"pid {proc.pid} (gone before it could be killed: {exc})"
        described.append(what)
    return described


async def check_leftovers(run_ids: set[str], when: str) -> list[str]:
    """Scan for children of these runs still alive; kill any found and report them."""
    found = await asyncio.to_thread(scan_leftovers, frozenset(run_ids))
    if not found:
        return []
    killed = await asyncio.to_thread(kill_leftovers, found)
    return [f"left behind {when}, killed: {what}" for what in killed]


# --- results -------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One line of the final table."""

    name: str
    unit: str
    value: float
    target: str
    met: bool | None
    baseline: float | None = None

    @property
    def ratio(self) -> float | None:
        return None if self.baseline is None else self.value / self.baseline


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def p95(values: Sequence[float]) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def ms(seconds: float) -> float:
    return seconds * 1000.0


def detail(text: str) -> None:
    print(f"  {text}", flush=True)


# --- 1. spawn latency ----------------------------------------------------------------


def time_subprocess_run(count: int) -> list[float]:
    """Seconds per `subprocess.run(["true"])`, run in a worker thread."""
    times: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        # The baseline IS subprocess.run; it runs in a worker thread, not on the loop.
        subprocess.run(["true"], check=True)  # noqa: TID251
        times.append(time.perf_counter() - start)
    return times


async def time_spawns(server: Server, count: int) -> list[float]:
    times: list[float] = []
    for _ in range(count):
        elapsed, result = await timed_request(
            server, "spawn", {"command": ["true"], "mode": "task"}
        )
        problem = status_problem(result, "completed", "spawn of `true`")
        if problem is not None:  # a wrong answer, yet still an answer: keep timing
            server.problems.append(problem)
        times.append(elapsed)
    return times


async def time_pings(server: Server, count: int) -> list[float]:
    return [(await timed_request(server, "ping", {}))[0] for _ in range(count)]


# Section 1's median spawn latency and the tracking mode it ran with, for the rows
# that compare tracking modes.
SPAWN_MEDIAN: dict[str, tuple[str, float]] = {}


async def bench_spawn(server: Server, opts: Options) -> list[Row]:
    await time_spawns(server, SPAWN_WARMUP)
    served = await time_spawns(server, opts.spawns)
    mode = str((await request(server, "ping", {})).get("processTracking"))
    SPAWN_MEDIAN["auto"] = (mode, median(served))
    # The request/reply round trip alone, as this client sees it: the part of a
    # spawn's latency that is not starting, watching and reporting the child.
    pings = await time_pings(server, opts.spawns)
    await asyncio.to_thread(time_subprocess_run, SPAWN_WARMUP)
    base = await asyncio.to_thread(time_subprocess_run, opts.spawns)
    detail(
        f"spawn x{opts.spawns}: server median {ms(median(served)):.2f} ms, "
        f"p95 {ms(p95(served)):.2f} ms, max {ms(max(served)):.2f} ms; subprocess.run "
        f"median {ms(median(base)):.2f} ms, p95 {ms(p95(base)):.2f} ms; "
        f"ping round trip median {ms(median(pings)):.2f} ms"
    )
    ratio = median(served) / median(base)
    return [
        Row(
            "spawn latency, median",
            "ms",
            ms(median(served)),
            f"ratio <= {TARGET_SPAWN_RATIO:g}",
            ratio <= TARGET_SPAWN_RATIO,
            ms(median(base)),
        ),
        Row("spawn latency, p95", "ms", ms(p95(served)), "-", None, ms(p95(base))),
        Row("ping round trip, median", "ms", ms(median(pings)), "-", None, ms(median(base))),
    ]


async def bench_spawn_tracking(server: Server, opts: Options) -> list[Row]:
    """Spawn latency on a server forced to another tracking mode, against section 1's."""
    await time_spawns(server, SPAWN_WARMUP)
    served = median(await time_spawns(server, opts.spawns))
    mode = str((await request(server, "ping", {})).get("processTracking"))
    auto_mode, auto = SPAWN_MEDIAN.get("auto", ("?", float("nan")))
    detail(f"spawn x{opts.spawns} with {mode} tracking: median {ms(served):.2f} ms")
    return [Row(f"spawn median, {auto_mode} vs {mode}", "ms", ms(auto), "-", None, ms(served))]


# --- 2. output drain -----------------------------------------------------------------


async def time_server_drain(server: Server, chunks: int) -> float:
    command = [sys.executable, "-c", WRITER, str(chunks)]
    # Its lines of `x` are base64-like runs: kept, this measures the drain (see 2c).
    spawn = {"command": command, "mode": "task", "redact": False}
    elapsed, result = await timed_request(server, "spawn", spawn)
    expect_status(result, "completed", "the writer")
    output = result.get("output")
    written = output.get("bytes") if isinstance(output, dict) else None
    if written != chunks * WRITER_CHUNK:
        raise BenchError(f"the writer's output.bytes is {written!r}, not {chunks * WRITER_CHUNK}")
    return elapsed


async def time_pipe_drain(chunks: int) -> float:
    """The writer piped into `cat > /dev/null`: seconds from start to both exits."""
    return await time_into_cat([sys.executable, "-c", WRITER, str(chunks)])


async def time_into_cat(command: Sequence[str]) -> float:
    """`command` piped into `cat > /dev/null`: seconds from start to both exits."""
    read_fd, write_fd = os.pipe()
    start = time.perf_counter()
    try:
        writer = await asyncio.create_subprocess_exec(
            *command, stdin=subprocess.DEVNULL, stdout=write_fd
        )
        cat = await asyncio.create_subprocess_exec("cat", stdin=read_fd, stdout=subprocess.DEVNULL)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    codes = await bounded(asyncio.gather(writer.wait(), cat.wait()), "the baseline pipeline")
    elapsed = time.perf_counter() - start
    if any(codes):
        raise BenchError(f"baseline pipeline exited with {list(codes)}")
    return elapsed


def peak_rss_mb(pid: int) -> float:
    """VmHWM of `pid` in decimal MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise BenchError(f"no VmHWM in /proc/{pid}/status")


async def bench_drain(server: Server, opts: Options) -> list[Row]:
    chunks = opts.drain_mib * 1024 * 1024 // WRITER_CHUNK
    await time_spawns(server, 1)  # warm-up: the first spawn of a server is slower
    served: list[float] = []
    base: list[float] = []
    for _ in range(opts.drain_repeat):
        served.append(await time_server_drain(server, chunks))
        base.append(await time_pipe_drain(chunks))
    rss = peak_rss_mb(server.proc.pid)
    mib_s = opts.drain_mib / median(served)
    detail(
        f"drain {opts.drain_mib} MiB x{opts.drain_repeat}: server "
        f"{', '.join(f'{t:.3f}' for t in served)} s ({mib_s:,.0f} MiB/s at the median); "
        f"pipe to cat {', '.join(f'{t:.3f}' for t in base)} s; server VmHWM {rss:.1f} MB"
    )
    ratio = median(served) / median(base)
    return [
        Row(
            f"drain {opts.drain_mib} MiB, median",
            "s",
            median(served),
            f"ratio <= {TARGET_DRAIN_RATIO:g}",
            ratio <= TARGET_DRAIN_RATIO,
            median(base),
        ),
        Row(
            "server peak RSS (VmHWM)",
            "MB",
            rss,
            f"< {TARGET_PEAK_RSS_MB:g} MB",
            rss < TARGET_PEAK_RSS_MB,
        ),
    ]


# --- 2b. output without newlines -----------------------------------------------------


@dataclass(frozen=True)
class Writer:
    """One way of writing the drain's bytes, as lines of 1 KiB and without a newline."""

    name: str
    lines: Sequence[str]
    flat: Sequence[str]


def drain_writers(total: int) -> tuple[Writer, ...]:
    chunks = str(total // WRITER_CHUNK)
    # `yes` repeats a line of 1023 zeros; `head` cuts the stream at `total` bytes.
    source = f'yes "$(printf %01023d 0)" | head -c {total}'
    return (
        Writer(
            "64 KiB writes",
            [sys.executable, "-c", WRITER, chunks, "lines"],
            [sys.executable, "-c", WRITER, chunks, "flat"],
        ),
        Writer(
            "yes|head|tr",
            ["sh", "-c", f"{source} | tr 0 x"],
            ["sh", "-c", f"{source} | tr '0\\n' xx"],
        ),
        Writer(
            "yes|head vs tr",
            ["sh", "-c", source],
            ["sh", "-c", f"head -c {total} /dev/zero | tr '\\0' x"],
        ),
    )


@dataclass
class Drained:
    """What the drains of one kind of output took, through the server and into `cat`."""

    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak_mb: float = 0.0
    cat: list[float] = field(default_factory=list)


def loop_cpu_seconds(pid: int) -> float:
    """CPU time of `pid`'s main thread, its event loop, to the nanosecond (psutil counts
    in clock ticks of 10 ms, too coarse for a drain of a tenth of a second)."""
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0]) / 1e9


def reset_peak_rss(pid: int) -> None:
    """Start VmHWM afresh from the current RSS (Linux: writing 5 to clear_refs)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


async def time_drain_of(
    server: Server,
    command: Sequence[str],
    total: int | None,
    lines: int,
    into: Drained,
    spawn: Json | None = None,
) -> None:
    """One drain of `total` bytes (None: not checked) in `lines` lines through the server,
    then into `cat`
    (`spawn`: more params; by default `redact: false`, which keeps lines of `x`)."""
    pid = server.proc.pid
    reset_peak_rss(pid)
    cpu = loop_cpu_seconds(pid)
    elapsed, result = await timed_request(
        server, "spawn", {"command": list(command), "mode": "task", **(spawn or {"redact": False})}
    )
    into.cpu.append(loop_cpu_seconds(pid) - cpu)
    into.peak_mb = max(into.peak_mb, peak_rss_mb(pid))
    expect_status(result, "completed", f"the writer {shlex.join(command)[:60]}")
    output = result.get("output")
    counts = (output.get("bytes"), output.get("lines")) if isinstance(output, dict) else None
    if counts is None or counts[1] != lines or total not in (None, counts[0]):
        raise BenchError(f"output (bytes, lines) is {counts!r}, not {(total, lines)}")
    into.seconds.append(elapsed)
    into.cat.append(await time_into_cat(command))


async def bench_drain_flat(server: Server, opts: Options) -> list[Row]:
    total = opts.drain_mib * 1024 * 1024 // WRITER_CHUNK * WRITER_CHUNK
    await time_spawns(server, 1)  # warm-up: the first spawn of a server is slower
    rows: list[Row] = []
    for writer in drain_writers(total):
        lines, flat = Drained(), Drained()
        for _ in range(opts.drain_repeat):
            await time_drain_of(server, writer.lines, total, total // 1024, lines)
            await time_drain_of(server, writer.flat, total, 1, flat)
        rows += flat_rows(writer.name, lines, flat)
    return rows + time_parsers(total)


# --- 2c. redaction ---------------------------------------------------------------------


async def bench_redaction(server: Server, opts: Options) -> list[Row]:
    total = opts.drain_mib * 1024 * 1024 // WRITER_CHUNK * WRITER_CHUNK
    chunks = str(total // WRITER_CHUNK)
    lines = total // 1024
    await time_spawns(server, 1)  # warm-up: the first spawn of a server is slower
    redacting: Json = {"env": {"API_TOKEN": REDACTION_SECRET}}  # and `redact` left true
    rows: list[Row] = []
    for name, mode in (("text", "text"), ("lines of x", "lines")):
        command = [sys.executable, "-c", WRITER, chunks, mode]
        plain, redacted = Drained(), Drained()
        for _ in range(opts.drain_repeat):
            await time_drain_of(server, command, total, lines, plain)
            # `bytes`: the redacted head, then the rest as printed (protocol.md §12.1).
            await time_drain_of(server, command, None, lines, redacted, redacting)
        for label, drained in (("redact: false", plain), ("redacted", redacted)):
            detail(
                f"{name}, {label}: {', '.join(f'{t:.3f}' for t in drained.seconds)} s; "
                f"server loop CPU {', '.join(f'{t:.3f}' for t in drained.cpu)} s; "
                f"server VmHWM {drained.peak_mb:.1f} MB"
            )
        ratio = median(redacted.seconds) / median(plain.seconds)
        cpu = median(redacted.cpu) / median(plain.cpu)
        detail(f"{name}: redacted / redact: false = {ratio:.2f} in time, {cpu:.2f} in loop CPU")
        rows += [
            Row(
                f"redaction, {name}",
                "s",
                median(redacted.seconds),
                f"ratio <= {TARGET_REDACTION_RATIO:g}",
                ratio <= TARGET_REDACTION_RATIO,
                median(plain.seconds),
            ),
            Row(
                f"redaction loop CPU, {name}",
                "s",
                median(redacted.cpu),
                "-",
                None,
                median(plain.cpu),
            ),
        ]
    return rows + [time_redactor(total, name, line) for name, line in REDACTOR_CONTENTS]


REDACTOR_CONTENTS: Final = (
    ("text", (b"the quick brown fox jumps over the lazy dog " * 24)[:1023] + b"\n"),
    ("lines of x", b"x" * 1023 + b"\n"),
)


def time_redactor(total: int, name: str, line: bytes) -> Row:
    """The redactor (a secret, and base64-like runs) against the command parser, each fed
    `total` bytes of `line`s in chunks of 256 KiB; best of PARSER_REPEAT, alternating."""
    data = line * (256 * 1024 // len(line))
    redaction = Redaction.of({"API_TOKEN": REDACTION_SECRET})
    seconds = best_feeds(
        total,
        {
            "parser": (command_feed, data),
            "redactor": (lambda: StreamRedactor(redaction).feed, data),
        },
    )
    ratio = seconds["redactor"] / seconds["parser"]
    detail(
        f"redactor alone, {name}: {seconds['redactor']:.4f} s; command parser "
        f"{seconds['parser']:.4f} s (ratio {ratio:.2f})"
    )
    return Row(
        f"redactor alone vs parser, {name}", "s", seconds["redactor"], "-", None, seconds["parser"]
    )


def flat_rows(name: str, lines: Drained, flat: Drained) -> list[Row]:
    """The rows of one writer: the server's ratio (no newline / lines), against the
    same writers' ratio into `cat`, which is what the writers alone make of it."""
    for label, drained in (("lines", lines), ("no newline", flat)):
        detail(
            f"{name}, {label}: {', '.join(f'{t:.3f}' for t in drained.seconds)} s; "
            f"server loop CPU {', '.join(f'{t:.3f}' for t in drained.cpu)} s; "
            f"server VmHWM {drained.peak_mb:.1f} MB; "
            f"into cat {', '.join(f'{t:.3f}' for t in drained.cat)} s"
        )
    served = median(flat.seconds) / median(lines.seconds)
    alone = median(flat.cat) / median(lines.cat)
    met = served <= TARGET_FLAT_RATIO * max(alone, 1.0)
    detail(
        f"{name}: no newline / lines = {served:.2f} through the server, {alone:.2f} into cat "
        f"(goal <= {TARGET_FLAT_RATIO:g}, times cat's where that is over 1: "
        f"{'met' if met else 'NOT met'})"
    )
    return [
        Row(
            f"no newline vs lines, {name}",
            "s",
            median(flat.seconds),
            f"<= {TARGET_FLAT_RATIO:g} x cat",
            met,
            median(lines.seconds),
        ),
        Row("  the same into cat", "s", median(flat.cat), "-", None, median(lines.cat)),
        Row("  server loop CPU, same", "s", median(flat.cpu), "-", None, median(lines.cpu)),
        Row(
            "  server peak RSS, same",
            "MB",
            flat.peak_mb,
            f"< {TARGET_PEAK_RSS_MB:g} MB",
            max(lines.peak_mb, flat.peak_mb) < TARGET_PEAK_RSS_MB,
            lines.peak_mb,
        ),
    ]


PARSER_CHUNKS: Final = (8 * 1024, 256 * 1024)
PARSER_REPEAT: Final = 5
# A line of 1 KiB as an agent CLI prints it: one JSON event.
AGENT_LINE: Final = b'{"type":"text","text":"' + b"x" * 998 + b'"}\n'


def command_feed() -> Callable[[bytes], None]:
    return CommandParser().on_stdout


def agent_feed() -> Callable[[bytes], None]:
    lines = JsonLines()

    def feed(data: bytes) -> None:
        for _event in lines.feed(data):
            pass

    return feed


def time_parsers(total: int) -> list[Row]:
    parsers = (
        ("command parser", command_feed, b"x" * 1023 + b"\n"),
        ("agent lines", agent_feed, AGENT_LINE),
    )
    return [
        time_parser(total, size, name, make, line)
        for name, make, line in parsers
        for size in PARSER_CHUNKS
    ]


Feeds = Mapping[str, tuple[Callable[[], Callable[[bytes], object]], bytes]]
"""By name: what makes a feed, and the chunk it is fed."""


def best_feeds(total: int, feeds: Feeds) -> dict[str, float]:
    """Seconds each feed takes to be fed `total` bytes in its chunks: best of
    PARSER_REPEAT, the feeds alternating so that a busy moment of the machine is as
    likely to fall on any."""
    seconds = dict.fromkeys(feeds, float("inf"))
    for _ in range(PARSER_REPEAT):
        for kind, (make, data) in feeds.items():
            feed = make()
            start = time.perf_counter()
            for _ in range(total // len(data)):
                feed(data)
            seconds[kind] = min(seconds[kind], time.perf_counter() - start)
    return seconds


def time_parser(
    total: int, size: int, name: str, make: Callable[[], Callable[[bytes], None]], line: bytes
) -> Row:
    """A child's output parser fed `total` bytes in chunks of `size`: no newline vs lines.

    Best of PARSER_REPEAT, the two kinds alternating so that a busy moment of the
    machine is as likely to fall on either."""
    chunks = {"lines": line * (size // len(line)), "flat": b"x" * (size // len(line) * len(line))}
    seconds = best_feeds(total, {kind: (make, data) for kind, data in chunks.items()})
    ratio = seconds["flat"] / seconds["lines"]
    label = f"{name}, {size // 1024} KiB chunks"
    detail(
        f"{label}: lines {seconds['lines']:.4f} s, "
        f"no newline {seconds['flat']:.4f} s (ratio {ratio:.2f})"
    )
    return Row(
        label,
        "s",
        seconds["flat"],
        f"ratio <= {TARGET_FLAT_RATIO:g}",
        ratio <= TARGET_FLAT_RATIO,
        seconds["lines"],
    )


# --- 3. stop latency -----------------------------------------------------------------


def is_output(event: Json) -> bool:
    return event.get("type") == "output"


async def time_one_stop(server: Server, ignore_term: bool, grace_ms: int | None) -> float:
    """Spawn a ready tree, then time `stop` from write to its (cancelled) reply."""
    command = [sys.executable, str(TREE_SCRIPT), str(TREE_SIZE)]
    if ignore_term:
        command.append("--ignore-term")
    run_id = run_id_of(await request(server, "spawn", {"command": command, "stream": True}))
    first = await wait_event(server, run_id, is_output, f"waiting for the tree {run_id}")
    if "ready" not in str(first.get("text")):
        raise BenchError(f"the tree's first output is not 'ready': {first!r:.300}")
    params: Json = {"runId": run_id}
    if grace_ms is not None:
        params["graceMs"] = grace_ms
    elapsed, result = await timed_request(server, "stop", params)
    expect_status(result, "cancelled", f"stop of {run_id}")
    if result.get("alreadyTerminal") is not False:
        raise BenchError(f"stop of {run_id}: alreadyTerminal is {result.get('alreadyTerminal')}")
    return elapsed


async def time_stops(server: Server, count: int, ignore_term: bool) -> list[float]:
    grace = STOP_GRACE_MS if ignore_term else None
    return [await time_one_stop(server, ignore_term, grace) for _ in range(count)]


async def bench_stop(server: Server, opts: Options) -> list[Row]:
    honoured = await time_stops(server, opts.stops, ignore_term=False)
    ignored = await time_stops(server, opts.stops_ignore_term, ignore_term=True)
    for label, times in (("SIGTERM honoured", honoured), ("SIGTERM ignored", ignored)):
        detail(
            f"stop, {label}: {', '.join(f'{ms(t):.0f}' for t in times)} ms "
            f"(median {ms(median(times)):.1f})"
        )
    return [
        Row(
            f"stop {TREE_SIZE}-proc tree, median",
            "ms",
            ms(median(honoured)),
            f"<= {TARGET_STOP_MS:g} ms",
            ms(median(honoured)) <= TARGET_STOP_MS,
        ),
        Row(
            f"stop, TERM ignored, grace {STOP_GRACE_MS}",
            "ms",
            ms(median(ignored)),
            f"<= {TARGET_STOP_IGNORED_MS:g} ms",
            ms(median(ignored)) <= TARGET_STOP_IGNORED_MS,
        ),
    ]


# --- 4. idle cost --------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` itself (all its threads, not its children)."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def is_child_running(event: Json) -> bool:
    return event.get("type") == "child" and event.get("status") == "running"


async def stop_all(server: Server, run_ids: Sequence[str]) -> None:
    results = await asyncio.gather(*(request(server, "stop", {"runId": r}) for r in run_ids))
    for run_id, result in zip(run_ids, results, strict=True):
        expect_status(result, "cancelled", f"stop of {run_id}")


async def bench_idle(server: Server, opts: Options) -> list[Row]:
    run_ids: list[str] = []
    for _ in range(IDLE_CHILDREN):
        run_ids.append(run_id_of(await request(server, "spawn", {"command": ["sleep", "30"]})))
    for run_id in run_ids:
        await wait_event(server, run_id, is_child_running, f"waiting for {run_id} to run")
    before = cpu_seconds(server.proc.pid)
    start = time.perf_counter()
    # The measurement window itself: the server is left alone while its children sleep.
    await asyncio.sleep(opts.idle_seconds)
    used = cpu_seconds(server.proc.pid) - before
    window = time.perf_counter() - start
    await stop_all(server, run_ids)
    pct = 100.0 * used / window
    detail(
        f"idle, {IDLE_CHILDREN} sleeping children: {used * 1000:.0f} ms CPU "
        f"in {window:.2f} s = {pct:.2f} % of one core"
    )
    return [
        Row(
            f"idle CPU, {IDLE_CHILDREN} children",
            "%",
            pct,
            f"< {TARGET_IDLE_CPU_PCT:g} %",
            pct < TARGET_IDLE_CPU_PCT,
        )
    ]


# --- orchestration -------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    server: tuple[str, ...]
    spawns: int
    drain_mib: int
    drain_repeat: int
    stops: int
    stops_ignore_term: int
    idle_seconds: float
    only: tuple[str, ...] = ()
    """Section numbers to run (all when empty)."""


Bench = Callable[[Server, Options], Awaitable[list[Row]]]


@dataclass(frozen=True)
class Section:
    title: str
    bench: Bench
    server_args: tuple[str, ...] = ()


SECTIONS: Final = (
    Section("1. spawn latency", bench_spawn),
    Section(
        "1b. spawn latency, subreaper", bench_spawn_tracking, ("--process-tracking", "subreaper")
    ),
    Section("1c. spawn latency, marker", bench_spawn_tracking, ("--process-tracking", "marker")),
    Section("2. output drain", bench_drain),
    Section("2b. output without newlines", bench_drain_flat),
    Section("2c. redaction", bench_redaction),
    Section("3. stop latency", bench_stop),
    Section("4. idle cost", bench_idle, ("--max-concurrency", str(IDLE_CHILDREN))),
)


async def run_section(section: Section, opts: Options, problems: list[str]) -> list[Row]:
    """One section on a fresh server; then check that none of its children survive."""
    print(section.title, flush=True)
    current: Server | None = None
    try:
        async with serving(opts.server, section.server_args) as server:
            current = server
            rows = await section.bench(server, opts)
            problems += await check_leftovers(server.run_ids, f"by '{section.title}' (server up)")
    finally:
        if current is not None:
            if current.problems:
                problems += [*current.problems, f"then {current.describe()}"]
            problems += await check_leftovers(
                current.run_ids, f"by '{section.title}' (server closed)"
            )
    return rows


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.3f}{unit}" if abs(value) < 10 else f"{value:,.1f}{unit}"


def format_table(rows: Sequence[Row]) -> list[str]:
    header = f"{'measurement':<34} {'value':>12} {'baseline':>12} {'ratio':>6}  {'target':<15} met"
    lines = [header, "-" * len(header)]
    for row in rows:
        met = "-" if row.met is None else ("yes" if row.met else "no")
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
        lines.append(
            f"{row.name:<34} {fmt(row.value, ' ' + row.unit):>12} "
            f"{fmt(row.baseline, ' ' + row.unit):>12} {ratio:>6}  {row.target:<15} {met}"
        )
    return lines


def print_table_of(name: str, measured: Coroutine[Any, Any, list[Row]]) -> int:
    """Run `measured` on a fresh loop, print its table and how long it all took: 0, or 1
    with no table when it raised a BenchError (the run is invalid)."""
    started = time.perf_counter()
    try:
        rows = asyncio.run(measured)
    except BenchError as exc:
        print(f"{name} bench failed: {exc}", file=sys.stderr)
        code = 1
    else:
        print()
        print("\n".join(format_table(rows)))
        code = 0
    print(f"(took {time.perf_counter() - started:.1f} s)")
    return code


def format_header(opts: Options) -> list[str]:
    return [
        f"machine: nproc={os.cpu_count()} python={platform.python_version()} "
        f"{platform.system()} {platform.machine()}",
        f"server: {shlex.join(opts.server)}",
    ]


async def run(opts: Options) -> int:
    print("\n".join(format_header(opts)), flush=True)
    rows: list[Row] = []
    problems: list[str] = []
    failure: BenchError | None = None
    try:
        for section in SECTIONS:
            if not opts.only or section.title.split(".")[0] in opts.only:
                rows += await run_section(section, opts, problems)
    except BenchError as exc:
        failure = exc
    print("\n".join(["", *format_table(rows)]))
    for problem in problems:
        print(f"runs bench: ERROR: {problem}", file=sys.stderr)
    if failure is not None:
        print(f"runs bench: FAILED: {failure}", file=sys.stderr)
    return 1 if failure is not None or problems else 0  # a missed target is not a failure


# --- command line --------------------------------------------------------------------


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def default_server() -> str:
    beside = Path(sys.executable).parent / "subagent-host"
    if beside.exists():
        return str(beside)
    found = shutil.which("subagent-host")
    if found is None:
        raise BenchError("subagent-host not found beside the interpreter nor on PATH")
    return found


def server_command(option: str | None) -> tuple[str, ...]:
    """`--server CMD` as an argv, else the installed server."""
    server = tuple(shlex.split(option)) if option else (default_server(),)
    if not server:
        raise BenchError("--server is empty")
    return server


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--spawns", type=positive_int, default=200, metavar="N")
    parser.add_argument("--drain-mib", type=positive_int, default=200, metavar="N")
    parser.add_argument("--drain-repeat", type=positive_int, default=5, metavar="N")
    parser.add_argument("--stops", type=positive_int, default=10, metavar="N")
    parser.add_argument("--stops-ignore-term", type=positive_int, default=5, metavar="N")
    parser.add_argument("--idle-seconds", type=positive_float, default=5.0, metavar="S")
    parser.add_argument("--server", metavar="CMD", help="server command line to benchmark")
    parser.add_argument("--only", nargs="+", default=[], metavar="N", help="sections to run")
    args = parser.parse_args(argv)
    return Options(
        server=server_command(args.server),
        spawns=args.spawns,
        drain_mib=args.drain_mib,
        drain_repeat=args.drain_repeat,
        stops=args.stops,
        stops_ignore_term=args.stops_ignore_term,
        idle_seconds=args.idle_seconds,
        only=tuple(args.only),
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return asyncio.run(run(parse_args(argv)))
    except BenchError as exc:
        print(f"runs bench: FAILED: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
