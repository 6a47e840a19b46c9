"""Round-trip benchmark of `ping` against the installed subagent-host.

What is measured
----------------
Requests per second of JSON-RPC `ping` round trips over the server's stdin and
stdout, for both framings the server auto-detects from the first byte:

* NDJSON: one JSON text per line.
* LSP: `Content-Length: N\\r\\n\\r\\n<body>`.

and two request patterns per framing:

* pipelined: a writer task writes all requests while a reader task reads the
  replies concurrently; timed from the first write to the last reply.
* sequential: send one request, await its reply, repeat.

Every reply is checked: it must carry an id that was asked for (the very id in
the sequential pattern, an outstanding and not yet answered id when pipelined)
and a `result` with `"pong": true`. Anything else exits non-zero.

Each (framing, pattern) measurement uses a fresh server process, warmed up with
a few pings before timing. The baseline is a minimal stdlib asyncio NDJSON echo
server (`BASELINE_SERVER` below) measured with the very same client code: it
parses each request and answers it with the very `result` object the real
server gave a first ping (captured at the start of the run), so both sides
parse and serialize the same bytes and the ratio measures what the server adds
on top (framing, validation, dispatch, typed params and results). It speaks
only NDJSON, so the LSP rows are compared against the NDJSON baseline.
Every measurement is repeated and the median req/s is reported (on two shared
cores a single lucky or unlucky run is common, and the median ignores it); the
repeats are interleaved so slow drift on the machine hits every row alike.

How to run
----------
    .venv/bin/python bench/ping.py [--pipelined N] [--sequential N] [--repeat N]
                                   [--server CMD]

`--server` takes a command line (split like a shell would, without a shell);
by default the `subagent-host` next to the running interpreter is used, else
the one on PATH. Exits 0 whether or not the throughput target is met, and 1 on
any protocol error, timeout or misbehaving server process.
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
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from bench.common import READ_CHUNK, BenchError, bounded, drain_stderr, start_piped

# A server must exit this soon after its stdin is closed, or it is killed.
EXIT_TIMEOUT_S: Final = 10.0
WARMUP_PINGS: Final = 200
# Large enough for any sane reply line or header block.
STREAM_LIMIT: Final = 16 * 1024 * 1024
TARGET_RATIO: Final = 0.6

BASELINE_SERVER: Final = """
import asyncio
import json
import sys

# The very result object the real server answers ping with (passed by the bench),
# so both servers parse the same requests and serialize the same replies.
RESULT = json.loads(sys.argv[1])


async def main():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    while line := await reader.readline():
        if not line.strip():
            continue
        msg = json.loads(line)
        reply = {"jsonrpc": "2.0", "id": msg["id"], "result": RESULT}
        writer.write((json.dumps(reply) + "\\n").encode())
        await writer.drain()
    # Flush everything before exiting: drain now waits for an empty buffer.
    transport.set_write_buffer_limits(high=0)
    await writer.drain()
    transport.close()


asyncio.run(main())
"""


class Framing(Enum):
    NDJSON = "ndjson"
    LSP = "lsp"


class Pattern(Enum):
    PIPELINED = "pipelined"
    SEQUENTIAL = "sequential"


@dataclass
class Server:
    """One running server process and the client's view of it."""

    name: str
    proc: asyncio.subprocess.Process
    stdin: asyncio.StreamWriter
    stdout: asyncio.StreamReader
    framing: Framing
    stderr_tail: bytearray = field(default_factory=bytearray)
    stderr_task: asyncio.Task[None] | None = None
    next_id: int = 1

    def take_ids(self, count: int) -> list[int]:
        """Fresh request ids, unique over the life of this process."""
        ids = list(range(self.next_id, self.next_id + count))
        self.next_id += count
        return ids

    def describe(self) -> str:
        tail = self.stderr_tail.decode(errors="replace").strip()
        return f"{self.name} (pid {self.proc.pid}); stderr tail: {tail or '(empty)'}"


@dataclass(frozen=True)
class Target:
    """What to start and how to talk to it."""

    name: str
    argv: tuple[str, ...]


# --- wire -----------------------------------------------------------------------------


def encode_request(msg_id: int, framing: Framing) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "ping"}).encode()
    if framing is Framing.NDJSON:
        return body + b"\n"
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


async def read_ndjson_body(reader: asyncio.StreamReader) -> bytes:
    line = await reader.readline()
    if not line.endswith(b"\n"):
        raise asyncio.IncompleteReadError(line, None)
    return line


def content_length(header: bytes) -> int:
    """The Content-Length of an LSP header block (ending in the blank line)."""
    for line in header.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"content-length":
            try:
                return int(value.strip())
            except ValueError:
                break
    raise BenchError(f"bad LSP header block in reply: {header[:200]!r}")


async def read_lsp_body(reader: asyncio.StreamReader) -> bytes:
    header = await reader.readuntil(b"\r\n\r\n")
    return await reader.readexactly(content_length(header))


async def read_reply(server: Server) -> object:
    """Read and decode one reply frame in the server's framing."""
    try:
        if server.framing is Framing.NDJSON:
            body = await read_ndjson_body(server.stdout)
        else:
            body = await read_lsp_body(server.stdout)
    except asyncio.IncompleteReadError as exc:
        raise BenchError(
            f"stdout ended before a whole reply ({len(exc.partial)} bytes of one): "
            f"{server.describe()}"
        ) from None
    except (asyncio.LimitOverrunError, ValueError) as exc:
        raise BenchError(
            f"reply frame too large or malformed ({exc}): {server.describe()}"
        ) from None
    try:
        reply: object = json.loads(body)
    except ValueError as exc:
        raise BenchError(f"reply is not JSON ({exc}): {body[:200]!r}") from None
    return reply


def check_pong(reply: object) -> int:
    """Validate one ping reply and return its id."""
    if not isinstance(reply, dict):
        raise BenchError(f"reply is not a JSON object: {reply!r:.200}")
    result = reply.get("result")
    msg_id = reply.get("id")
    if (
        reply.get("jsonrpc") != "2.0"
        or not isinstance(result, dict)
        or result.get("pong") is not True
        or type(msg_id) is not int
    ):
        raise BenchError(f"not a successful ping reply: {reply!r:.300}")
    return msg_id


# --- process lifecycle ---------------------------------------------------------------


async def start_server(target: Target, framing: Framing) -> Server:
    proc = await start_piped(target.argv, target.name, STREAM_LIMIT)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    server = Server(target.name, proc, proc.stdin, proc.stdout, framing)
    server.stderr_task = asyncio.create_task(drain_stderr(proc.stderr, server.stderr_tail))
    return server


async def discard_stdout(reader: asyncio.StreamReader) -> int:
    """Read to EOF; return how many bytes arrived that nobody asked for."""
    extra = 0
    while chunk := await reader.read(READ_CHUNK):
        extra += len(chunk)
    return extra


async def wait_exit(server: Server) -> int:
    """Read stdout to EOF and reap the process; return the unsolicited byte count."""
    extra, _status = await asyncio.gather(discard_stdout(server.stdout), server.proc.wait())
    return extra


async def close_stdin(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await bounded(writer.wait_closed(), "closing the server's stdin")
    except (BrokenPipeError, ConnectionResetError):
        pass  # The server is already gone; its exit status tells why.


async def stop_server(server: Server) -> str | None:
    """Close stdin, await exit (kill after EXIT_TIMEOUT_S); return a problem, if any."""
    await close_stdin(server.stdin)
    problems: list[str] = []
    try:
        extra = await bounded(wait_exit(server), "waiting for exit after EOF", EXIT_TIMEOUT_S)
        if extra:
            problems.append(f"{extra} unsolicited bytes on stdout")
    except BenchError as exc:
        problems.append(f"{exc}; killed")
        with contextlib.suppress(ProcessLookupError):
            server.proc.kill()
        await bounded(server.proc.wait(), "waiting for the killed server")
    if server.stderr_task is not None:
        await asyncio.wait({server.stderr_task}, timeout=EXIT_TIMEOUT_S)
        server.stderr_task.cancel()
    if server.proc.returncode not in (0, None) and not problems:
        problems.append(f"exited with status {server.proc.returncode}")
    return f"{'; '.join(problems)}: {server.describe()}" if problems else None


@asynccontextmanager
async def running(target: Target, framing: Framing) -> AsyncIterator[Server]:
    """A fresh server process, always stopped (and reaped) on the way out."""
    server = await start_server(target, framing)
    try:
        yield server
    except BaseException:
        problem = await stop_server(server)
        if problem:
            print(f"ping bench: while failing, also: {problem}", file=sys.stderr)
        raise
    problem = await stop_server(server)
    if problem:
        raise BenchError(problem)


# --- the two patterns ----------------------------------------------------------------


async def write_all(server: Server, frames: Sequence[bytes]) -> None:
    for frame in frames:
        server.stdin.write(frame)
        await server.stdin.drain()


async def read_all(server: Server, outstanding: set[int]) -> float:
    """Read one reply per outstanding id; return the time the last one arrived."""
    while outstanding:
        msg_id = check_pong(await read_reply(server))
        if msg_id not in outstanding:
            raise BenchError(f"reply to id {msg_id}, which is not outstanding")
        outstanding.remove(msg_id)
    return time.perf_counter()


async def run_pipelined(server: Server, count: int) -> float:
    """Write `count` requests while reading the replies; return the elapsed seconds."""
    ids = server.take_ids(count)
    frames = [encode_request(msg_id, server.framing) for msg_id in ids]
    start = time.perf_counter()
    writer = asyncio.create_task(write_all(server, frames))
    reader = asyncio.create_task(read_all(server, set(ids)))
    try:
        await bounded(asyncio.gather(writer, reader), f"pipelining {count} pings")
    finally:
        for task in (writer, reader):
            task.cancel()
        await asyncio.wait({writer, reader}, timeout=EXIT_TIMEOUT_S)
    return reader.result() - start


async def sequential_loop(server: Server, ids: Sequence[int], frames: Sequence[bytes]) -> None:
    for msg_id, frame in zip(ids, frames, strict=True):
        server.stdin.write(frame)
        await server.stdin.drain()
        got = check_pong(await read_reply(server))
        if got != msg_id:
            raise BenchError(f"asked for id {msg_id}, got a reply to id {got}")


async def run_sequential(server: Server, count: int) -> float:
    """Send `count` requests one at a time; return the elapsed seconds."""
    ids = server.take_ids(count)
    frames = [encode_request(msg_id, server.framing) for msg_id in ids]
    start = time.perf_counter()
    await bounded(sequential_loop(server, ids, frames), f"sending {count} sequential pings")
    return time.perf_counter() - start


async def measure(target: Target, framing: Framing, pattern: Pattern, count: int) -> float:
    """One measurement on a fresh, warmed-up process; return requests per second."""
    async with running(target, framing) as server:
        await run_pipelined(server, WARMUP_PINGS)
        if pattern is Pattern.PIPELINED:
            elapsed = await run_pipelined(server, count)
        else:
            elapsed = await run_sequential(server, count)
    return count / elapsed


# --- orchestration and report --------------------------------------------------------

Key = tuple[str, Framing, Pattern]


@dataclass(frozen=True)
class Plan:
    server: Target
    baseline: Target
    counts: dict[Pattern, int]
    repeat: int

    def keys(self) -> list[Key]:
        rows = [(self.server.name, f, p) for f in Framing for p in Pattern]
        return rows + [(self.baseline.name, Framing.NDJSON, p) for p in Pattern]

    def target(self, name: str) -> Target:
        return self.server if name == self.server.name else self.baseline


async def run_plan(plan: Plan) -> dict[Key, float]:
    """Every measurement `plan.repeat` times, interleaved; the median req/s of each."""
    rates: dict[Key, list[float]] = {}
    for round_no in range(1, plan.repeat + 1):
        for key in plan.keys():
            name, framing, pattern = key
            rate = await measure(plan.target(name), framing, pattern, plan.counts[pattern])
            print(
                f"  round {round_no}/{plan.repeat}  {name:<8} {framing.value:<6} "
                f"{pattern.value:<10} {rate:>10,.0f} req/s",
                file=sys.stderr,
            )
            rates.setdefault(key, []).append(rate)
    return {key: statistics.median(values) for key, values in rates.items()}


def ratio_of(plan: Plan, best: dict[Key, float], framing: Framing, pattern: Pattern) -> float:
    server = best[(plan.server.name, framing, pattern)]
    return server / best[(plan.baseline.name, Framing.NDJSON, pattern)]


def format_table(plan: Plan, best: dict[Key, float]) -> list[str]:
    header = (
        f"{'framing':<8} {'pattern':<11} {'server req/s':>13} {'baseline req/s':>15} {'ratio':>7}"
    )
    lines = [header, "-" * len(header)]
    for framing in Framing:
        for pattern in Pattern:
            server = best[(plan.server.name, framing, pattern)]
            baseline = best[(plan.baseline.name, Framing.NDJSON, pattern)]
            mark = "*" if framing is not Framing.NDJSON else " "
            lines.append(
                f"{framing.value:<8} {pattern.value:<11} {server:>13,.0f} "
                f"{baseline:>14,.0f}{mark} {ratio_of(plan, best, framing, pattern):>7.2f}"
            )
    lines.append("* the baseline speaks NDJSON only: LSP rows are compared to the NDJSON baseline.")
    return lines


def format_verdict(plan: Plan, best: dict[Key, float]) -> tuple[list[str], bool]:
    ratios = {f: ratio_of(plan, best, f, Pattern.PIPELINED) for f in Framing}
    met = all(r >= TARGET_RATIO for r in ratios.values())
    shown = ", ".join(f"{f.value} {r:.2f}" for f, r in ratios.items())
    return [
        f"target: ratio >= {TARGET_RATIO} for both framings, pipelined",
        f"target {'MET' if met else 'MISSED'} (pipelined ratios: {shown})",
    ], met


def format_header(plan: Plan) -> list[str]:
    return [
        f"machine: nproc={os.cpu_count()} python={platform.python_version()} "
        f"{platform.system()} {platform.machine()}",
        f"server: {shlex.join(plan.server.argv)}",
        f"pipelined={plan.counts[Pattern.PIPELINED]} "
        f"sequential={plan.counts[Pattern.SEQUENTIAL]} repeat={plan.repeat} "
        f"(median of repeats; warm-up {WARMUP_PINGS} pings per fresh process)",
    ]


# --- command line --------------------------------------------------------------------


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--pipelined", type=positive_int, default=5000, metavar="N")
    parser.add_argument("--sequential", type=positive_int, default=2000, metavar="N")
    parser.add_argument("--repeat", type=positive_int, default=7, metavar="N")
    parser.add_argument("--server", metavar="CMD", help="server command line to benchmark")
    return parser.parse_args(argv)


def default_server() -> str:
    beside = Path(sys.executable).parent / "subagent-host"
    if beside.exists():
        return str(beside)
    found = shutil.which("subagent-host")
    if found is None:
        raise BenchError("subagent-host not found beside the interpreter nor on PATH")
    return found


async def capture_ping_result(server: Target) -> object:
    """The `result` the server answers ping with, for the baseline to answer too."""
    async with running(server, Framing.NDJSON) as process:
        process.stdin.write(encode_request(process.take_ids(1)[0], Framing.NDJSON))
        reply = await bounded(read_reply(process), "reading the first ping reply")
        check_pong(reply)
    assert isinstance(reply, dict)
    return reply["result"]


async def build_plan(args: argparse.Namespace) -> Plan:
    argv = tuple(shlex.split(args.server)) if args.server else (default_server(),)
    if not argv:
        raise BenchError("--server is empty")
    server = Target("server", argv)
    result = json.dumps(await capture_ping_result(server))
    return Plan(
        server=server,
        baseline=Target("baseline", (sys.executable, "-c", BASELINE_SERVER, result)),
        counts={Pattern.PIPELINED: args.pipelined, Pattern.SEQUENTIAL: args.sequential},
        repeat=args.repeat,
    )


async def run(args: argparse.Namespace) -> int:
    plan = await build_plan(args)
    print("\n".join(format_header(plan)), flush=True)
    best = await run_plan(plan)
    verdict, _met = format_verdict(plan, best)
    print("\n".join(["", *format_table(plan, best), "", *verdict]))
    return 0  # A missed target is a measurement, not a failure.


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return asyncio.run(run(parse_args(argv)))
    except BenchError as exc:
        print(f"ping bench: FAILED: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
