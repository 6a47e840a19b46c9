"""Benchmark of the server's memory under a client that stops reading, and after a big run.

What is measured
----------------
Each measurement starts its own server (NDJSON framing, a throw-away
`--state-dir`), answered one `ping` first. The child is `tests/fakes/flood.py N`:
N MiB of 1 KiB lines, written as fast as it can, run with `stream: true` so
every byte goes to the client as `output` events. RSS is the server's own
(psutil), in decimal MB; the peak is VmHWM from /proc/<pid>/status.

1. A client that does not read. Baseline: the idle server's RSS after the
   `ping`. A background run streams 200 MiB while the client reads nothing;
   once the child's write count has stood still for a second (it is blocked
   on its pipe, held back by the server) the server's RSS is sampled for two
   more seconds, and the child must still be running. Then the client reads
   everything: every `output` byte must arrive, in order (the SHA-256 of what
   arrived equals that of what was written), with `seq` gap-free. Targets: the
   server's peak RSS over the whole measurement < 100 MB; bytes received /
   bytes sent = 1.
2. RSS after a big run. A fresh server's RSS after the `ping` (before), a
   `mode: "task"` run streaming 50 MiB to a client that reads it, then the
   server's RSS once the reply and a `status {}` came back (after). Target:
   after - before <= 20 MB.
3. Pipelined replays to a client that does not read. A `mode: "task"` run
   whose child (`head -c`) prints 8.5 MiB of NUL bytes (`\u0000` in JSON: six
   bytes each, the costliest text to replay) with `stream: true`; baseline:
   the server's RSS once its reply came back. The client stops reading, writes
   40 `status {runId, since: 0}` requests in one write, and samples the
   server's RSS until its CPU time has stood still for a second (it answers as
   the client reads, so it waits). Then it reads: each request must get one
   reply, every reply the same events up to the run's `lastSeq`. Target: the
   server's RSS while the replies wait <= baseline + 150 MB.

After each measurement the server's stdin is closed; it must exit 0 and the
flood child (found by pid) must be gone.

How to run
----------
    .venv/bin/python bench/memory.py [--held-mib N] [--after-mib N] [--replays N] [--server CMD]

Exits 0 whether or not the targets are met; 1 on any protocol error, timeout,
lost byte or process left behind.
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
import hashlib
import json
import os
import shlex
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import psutil

from bench.common import BenchError, bounded, drain_stderr
from bench.runs import Row, default_server, format_table

Json = dict[str, Any]

FLOOD: Final = Path(__file__).resolve().parent.parent / "tests" / "fakes" / "flood.py"
LINE: Final = b"x " * 511 + b"x\n"  # what flood.py writes, 1024 times per MiB
MIB: Final = 1024 * 1024
MB: Final = 1_000_000
STREAM_LIMIT: Final = 64 * MIB
EXIT_TIMEOUT_S: Final = 30.0
STILL_S: Final = 1.0  # the child's write count stands still this long: it is blocked
HELD_SAMPLE_S: Final = 2.0
TARGET_PEAK_MB: Final = 100.0
TARGET_AFTER_MB: Final = 20.0
NUL_BYTES: Final = 8 * MIB + MIB // 2  # what the replayed run prints (case 3)
TARGET_REPLAYS_MB: Final = 150.0
IDLE_S: Final = 1.0  # the server's CPU time stands still this long: it waits for the client


@dataclass
class Client:
    """A server process, and a reader of its stdout that keeps no output text."""

    proc: asyncio.subprocess.Process
    stdout_fd: int
    stderr_tail: bytearray = field(default_factory=bytearray)
    replies: dict[int, asyncio.Future[Json]] = field(default_factory=dict)
    seqs: list[int] = field(default_factory=list)
    output_bytes: int = 0
    digest: Any = field(default_factory=hashlib.sha256)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    transport: Any = None
    next_id: int = 1

    def describe(self) -> str:
        tail = self.stderr_tail.decode(errors="replace").strip()[-500:]
        return f"server pid {self.proc.pid}; stderr tail: {tail or '(empty)'}"

    def rss_mb(self) -> float:
        return float(psutil.Process(self.proc.pid).memory_info().rss) / MB

    def peak_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / MB
        raise BenchError("no VmHWM in /proc/<pid>/status")

    async def start_reading(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=STREAM_LIMIT)
        pipe = os.fdopen(self.stdout_fd, "rb", buffering=0)
        self.transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
        self.tasks.append(asyncio.create_task(self._read(reader)))

    def stop_reading(self) -> None:
        """Read nothing more from stdout until `resume_reading`: a client that went quiet."""
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                self._dispatch(json.loads(line))
        except (ValueError, BenchError) as exc:
            for future in self.replies.values():
                if not future.done():
                    future.set_exception(BenchError(f"{exc}: {self.describe()}"))

    def _dispatch(self, msg: Json) -> None:
        if "id" in msg:
            future = self.replies.pop(msg["id"], None)
            if future is None:
                raise BenchError(f"a reply nobody waits for: {msg!r:.300}")
            if "result" in msg:
                future.set_result(msg["result"])
            else:
                future.set_exception(BenchError(f"request failed: {msg['error']!r:.300}"))
            return
        event = msg["params"]
        self.seqs.append(event["seq"])
        if event["type"] == "output":
            data = event["text"].encode()
            self.output_bytes += len(data)
            self.digest.update(data)
        elif event["type"] == "status" and event["status"] not in ("queued", "running"):
            self.ended.set()

    async def send(self, method: str, params: Json) -> asyncio.Future[Json]:
        """Send one request; the future is its result once the client reads."""
        msg_id, self.next_id = self.next_id, self.next_id + 1
        future: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        self.replies[msg_id] = future
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await bounded(self.proc.stdin.drain(), f"sending {method}")
        return future

    async def send_all(self, method: str, params: Json, count: int) -> list[asyncio.Future[Json]]:
        """Send `count` identical requests in one write; their futures, in order."""
        futures: list[asyncio.Future[Json]] = []
        lines: list[bytes] = []
        for _ in range(count):
            msg_id, self.next_id = self.next_id, self.next_id + 1
            futures.append(asyncio.get_running_loop().create_future())
            self.replies[msg_id] = futures[-1]
            message = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
            lines.append(json.dumps(message).encode() + b"\n")
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"".join(lines))
        await bounded(self.proc.stdin.drain(), f"sending {count} {method}")
        return futures

    async def request(self, method: str, params: Json) -> Json:
        return await bounded(await self.send(method, params), f"waiting for {method}")


@contextlib.asynccontextmanager
async def serving(server: Sequence[str]) -> AsyncIterator[Client]:
    """A fresh server with its own state directory; stdin closed and its exit checked after."""
    with tempfile.TemporaryDirectory(prefix="memory-bench-") as state_dir:
        read_fd, write_fd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *server,
                "--state-dir",
                state_dir,
                stdin=asyncio.subprocess.PIPE,
                stdout=write_fd,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            os.close(read_fd)
            raise BenchError(f"cannot start the server {list(server)}: {exc}") from None
        finally:
            os.close(write_fd)
        assert proc.stderr is not None
        client = Client(proc, read_fd)
        client.tasks.append(asyncio.create_task(drain_stderr(proc.stderr, client.stderr_tail)))
        try:
            await client.start_reading()
            await client.request("ping", {})
            yield client
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                await bounded(proc.wait(), "waiting for the server to exit", EXIT_TIMEOUT_S)
            except BenchError:
                proc.kill()  # the one process this bench started
                await proc.wait()
                raise
            await asyncio.wait(client.tasks, timeout=EXIT_TIMEOUT_S)
            if proc.returncode != 0:
                raise BenchError(f"exited with status {proc.returncode}: {client.describe()}")


def expected_digest(mib: int) -> str:
    digest = hashlib.sha256()
    block = LINE * 1024
    for _ in range(mib):
        digest.update(block)
    return digest.hexdigest()


async def flood_child(server_pid: int) -> psutil.Process:
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:
            for child in psutil.Process(server_pid).children():
                with contextlib.suppress(psutil.Error):
                    if str(FLOOD) in child.cmdline():
                        return child
            await asyncio.sleep(0.05)


async def wait_blocked(child: psutil.Process) -> int:
    """Wait until the child's write count stands still for STILL_S; return it."""
    loop = asyncio.get_running_loop()
    written, since = -1, 0.0
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:
            try:
                now = child.io_counters().write_chars
            except psutil.NoSuchProcess:
                raise BenchError("the child ran to its end: nothing held it back") from None
            if now != written:
                written, since = now, loop.time()
            elif loop.time() - since >= STILL_S:
                return written
            await asyncio.sleep(0.1)


def check_gone(child: psutil.Process) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        if child.status() != psutil.STATUS_ZOMBIE:
            child.kill()
            raise BenchError(f"flood child pid {child.pid} outlived its server; killed")


def check_gap_free(client: Client, last_seq: int) -> None:
    if client.seqs != list(range(1, last_seq + 1)):
        raise BenchError(f"seq not gap-free: {len(client.seqs)} events for lastSeq {last_seq}")


def detail(text: str) -> None:
    print(f"  {text}", flush=True)


async def bench_held(server: Sequence[str], mib: int) -> list[Row]:
    async with serving(server) as client:
        idle = client.rss_mb()
        client.stop_reading()
        spawn = await client.send(
            "spawn", {"command": [sys.executable, str(FLOOD), str(mib)], "stream": True}
        )
        child = await flood_child(client.proc.pid)
        written = await wait_blocked(child)
        samples = []
        deadline = time.monotonic() + HELD_SAMPLE_S
        while time.monotonic() < deadline:
            samples.append(client.rss_mb())
            await asyncio.sleep(0.1)
        if not child.is_running() or child.io_counters().write_chars != written:
            raise BenchError("the child was not held back while the client did not read")
        held_peak = client.peak_mb()
        detail(
            f"not reading: child blocked after {written / MIB:.1f} MiB of {mib} MiB; "
            f"server RSS {max(samples):.1f} MB (peak so far {held_peak:.1f} MB), idle {idle:.1f} MB"
        )
        started = time.perf_counter()
        client.resume_reading()
        run_id = (await bounded(spawn, "the spawn reply"))["runId"]
        await bounded(client.ended.wait(), "the run's end")
        snapshot = await client.request("status", {"runId": run_id})
        took = time.perf_counter() - started
        check_gap_free(client, snapshot["lastSeq"])
        if snapshot["status"] != "completed":
            raise BenchError(f"the run ended {snapshot['status']}: {snapshot!r:.300}")
        intact = client.digest.hexdigest() == expected_digest(mib)
        sent = mib * MIB
        detail(
            f"then reading: {client.output_bytes:,} of {sent:,} bytes in {took:.1f} s, "
            f"in order: {intact}; {len(client.seqs)} events gap-free"
        )
        if not intact:
            raise BenchError("what arrived is not what the child wrote")
        peak = client.peak_mb()
    check_gone(child)
    received = client.output_bytes
    return [
        Row(
            f"peak RSS, {mib} MiB, non-reader", "MB", peak, "< 100 MB", peak < TARGET_PEAK_MB, idle
        ),
        Row("RSS while held back", "MB", max(samples), "-", None, idle),
        Row("bytes received / sent", "MB", received / MB, "= 1", received == sent, sent / MB),
    ]


async def bench_after(server: Sequence[str], mib: int) -> list[Row]:
    async with serving(server) as client:
        before = client.rss_mb()
        flood = [sys.executable, str(FLOOD), str(mib)]
        run = await client.request("spawn", {"command": flood, "stream": True, "mode": "task"})
        await client.request("status", {})
        after = client.rss_mb()
        check_gap_free(client, run["lastSeq"])
        if client.output_bytes != mib * MIB:
            raise BenchError(f"{client.output_bytes} bytes arrived of {mib * MIB}")
        detail(
            f"{mib} MiB streamed run: RSS before {before:.1f} MB, after {after:.1f} MB "
            f"(+{after - before:.1f} MB), peak {client.peak_mb():.1f} MB"
        )
    growth = after - before
    met = growth <= TARGET_AFTER_MB
    return [Row(f"RSS after a {mib} MiB streamed run", "MB", after, "+<= 20 MB", met, before)]


async def rss_until_idle(client: Client) -> float:
    """The server's highest RSS (MB) until its CPU time stands still for IDLE_S."""
    process = psutil.Process(client.proc.pid)
    loop = asyncio.get_running_loop()
    busy, since, peak = -1.0, loop.time(), 0.0
    async with asyncio.timeout(EXIT_TIMEOUT_S * 4):
        while True:
            peak = max(peak, client.rss_mb())
            times = process.cpu_times()
            if times.user + times.system != busy:
                busy, since = times.user + times.system, loop.time()
            elif loop.time() - since >= IDLE_S:
                return peak
            await asyncio.sleep(0.02)


async def bench_replays(server: Sequence[str], count: int) -> list[Row]:
    async with serving(server) as client:
        nuls = ["head", "-c", str(NUL_BYTES), "/dev/zero"]
        run = await client.request("spawn", {"command": nuls, "stream": True, "mode": "task"})
        before = client.rss_mb()
        client.stop_reading()
        status = {"runId": run["runId"], "since": 0}
        started = time.perf_counter()
        replies = await client.send_all("status", status, count)
        waiting = await rss_until_idle(client)
        client.resume_reading()
        results = [await bounded(reply, "a status reply") for reply in replies]
        took = time.perf_counter() - started
        first = results[0]
        if first["events"][-1]["seq"] != run["lastSeq"] or any(r != first for r in results):
            raise BenchError("the replays differ, or miss the run's last event")
        size = len(json.dumps(first))
        detail(
            f"{count} status {{since: 0}} of {NUL_BYTES / MIB:.1f} MiB of NULs: server RSS "
            f"{waiting:.1f} MB while unread (before {before:.1f} MB); each reply "
            f"{size / MB:.1f} MB, {len(first['events'])} events; all read in {took:.1f} s"
        )
    return [
        Row(
            f"RSS, {count} pipelined replays unread",
            "MB",
            waiting,
            "+<= 150 MB",
            waiting - before <= TARGET_REPLAYS_MB,
            before,
        ),
        Row("one replay's size", "MB", size / MB, "<= 8.7 MB", size <= 8.7 * MB),
    ]


async def run(opts: argparse.Namespace) -> int:
    server = tuple(shlex.split(opts.server))
    rows: list[Row] = []
    try:
        print(f"1. {opts.held_mib} MiB streamed to a client that does not read, then reads")
        rows += await bench_held(server, opts.held_mib)
        print(f"2. RSS before and after a {opts.after_mib} MiB streamed run")
        rows += await bench_after(server, opts.after_mib)
        print(f"3. {opts.replays} pipelined status {{since: 0}} to a client that does not read")
        rows += await bench_replays(server, opts.replays)
    except BenchError as exc:
        print(f"memory bench failed: {exc}", file=sys.stderr)
        return 1
    print()
    print("\n".join(format_table(rows)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--held-mib", type=int, default=200, metavar="N")
    parser.add_argument("--after-mib", type=int, default=50, metavar="N")
    parser.add_argument("--replays", type=int, default=40, metavar="N")
    parser.add_argument("--server", default=default_server(), metavar="CMD")
    started = time.perf_counter()
    code = asyncio.run(run(parser.parse_args(argv)))
    print(f"(took {time.perf_counter() - started:.1f} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
