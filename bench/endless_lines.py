"""Benchmark of a line that never ends: what the server answers, and what it costs.

What is measured
----------------
Each shape starts its own server (a throw-away `--state-dir`) with the framing
the shape needs, answered one `ping` first; the idle server's RSS then is the
baseline. The client sends the shape's opening bytes and then N MiB of `1`
(default 200), a MiB at a time, never a line end; then `\\r\\n` and a framed
`ping` with id "after".

1. LSP, `Content-Length: 1` then the `1`s: a header line that could begin a
   header block, where the resync would start again.
2. LSP, `X-Junk: ` then the `1`s: any other header line.
3. NDJSON, the start of a request then the `1`s: a line over the message limit.

Per shape: the error replies before the "after" ping's reply (target: exactly
1), the server's peak RSS (VmHWM from /proc/<pid>/status) against the idle
RSS (target: < +50 MB), and the server's CPU seconds (user + system) and the
wall time from the first junk byte to the "after" reply, for the record (the
junk must cost time in proportion to its size, not to its square).

How to run
----------
    .venv/bin/python bench/endless_lines.py [--mib N] [--server CMD]

Exits 0 whether or not the targets are met; 1 if the "after" ping is not
answered in time or the server does not exit 0 once its stdin is closed.
"""

from __future__ import annotations

import sys  # noqa: I001 -- the path is set before any other import
from pathlib import Path

# Run as `python bench/NAME.py`, imports start at the repository's root, not in bench/.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import asyncio
import shlex
import tempfile
import time
from collections.abc import Sequence
from typing import Final

import psutil

from bench.common import BenchError, bounded, drain_stderr, start_piped
from bench.runs import Row, default_server, print_table_of

MIB: Final = 1024 * 1024
MB: Final = 1_000_000
TARGET_GROWTH_MB: Final = 50.0
PING: Final = b'{"jsonrpc":"2.0","id":"%b","method":"ping"}'
# (name, framing, the bytes before the endless run of "1")
SHAPES: Final = (
    ("LSP Content-Length: line", "lsp", b"Content-Length: 1"),
    ("LSP X-Junk: line", "lsp", b"X-Junk: "),
    ("NDJSON line", "ndjson", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'),
)


def framed(body: bytes, framing: str) -> bytes:
    if framing == "ndjson":
        return body + b"\n"
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / MB
    raise BenchError("no VmHWM in /proc/<pid>/status")


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


async def read_until(stdout: asyncio.StreamReader, out: bytearray, marker: bytes) -> None:
    """Keep what the server writes in `out` until `marker` has arrived."""
    while marker not in out:
        chunk = await stdout.read(65536)
        if not chunk:
            raise BenchError("the server closed stdout")
        out += chunk


async def measure(
    server: Sequence[str], name: str, framing: str, start: bytes, mib: int
) -> list[Row]:
    with tempfile.TemporaryDirectory() as state:
        argv = [*server, "--state-dir", state, "--framing", framing]
        proc = await start_piped(argv, "the server", 64 * 1024)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        tail = bytearray()
        stderr = asyncio.create_task(drain_stderr(proc.stderr, tail))
        out = bytearray()
        proc.stdin.write(framed(PING % b"before", framing))
        await bounded(read_until(proc.stdout, out, b'"id":"before"'), "the first ping")
        process = psutil.Process(proc.pid)
        idle, cpu_before = process.memory_info().rss / MB, cpu_s(process)
        started = time.perf_counter()
        reading = asyncio.create_task(read_until(proc.stdout, out, b'"id":"after"'))
        proc.stdin.write(start)
        chunk = b"1" * MIB
        for _ in range(mib):
            proc.stdin.write(chunk)
            await bounded(proc.stdin.drain(), "sending the line")
        proc.stdin.write(b"\r\n" + framed(PING % b"after", framing))
        await bounded(reading, "the reply after the line")
        took, cpu = time.perf_counter() - started, cpu_s(process) - cpu_before
        peak = peak_mb(proc.pid)
        errors = out.count(b'"error"')
        proc.stdin.close()
        code = await bounded(proc.wait(), "the server's exit")
        await bounded(stderr, "the server's stderr")
        if code != 0:
            raise BenchError(f"the server exited {code}: {tail.decode(errors='replace')[-500:]}")
    print(
        f"  {name}: {errors} error(s), peak RSS {peak:.1f} MB (idle {idle:.1f} MB), "
        f"{cpu:.1f} s of CPU, {took:.1f} s"
    )
    growth_target = f"< +{TARGET_GROWTH_MB:g} MB"
    return [
        Row(f"{name}: error replies", "", errors, "= 1", errors == 1),
        Row(f"{name}: peak RSS", "MB", peak, growth_target, peak - idle < TARGET_GROWTH_MB, idle),
        Row(f"{name}: server CPU", "s", cpu, "-", None),
    ]


async def measure_all(server: Sequence[str], mib: int) -> list[Row]:
    rows: list[Row] = []
    for name, framing, start in SHAPES:
        print(f"{name}: {mib} MiB without a line end")
        rows += await measure(server, name, framing, start, mib)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--mib", type=int, default=200, metavar="N")
    parser.add_argument("--server", default=default_server(), metavar="CMD")
    opts = parser.parse_args(argv)
    return print_table_of("endless lines", measure_all(shlex.split(opts.server), opts.mib))


if __name__ == "__main__":
    sys.exit(main())
