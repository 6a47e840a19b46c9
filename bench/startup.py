"""Benchmark of the installed subagent-host's start-up: exec to the first reply.

What is measured
----------------
1. Cold start to the first `ping` reply. The clock starts just before the
   process is created; one NDJSON `ping` request is written at once (it waits
   in the pipe while the server starts) and the clock stops when the reply line
   arrives. The server runs with a throw-away `--state-dir`. Baseline: a bare
   stdlib asyncio NDJSON JSON-RPC server (ping.py's `BASELINE_SERVER`, run by
   the same interpreter) sent the same request, answering with the very result
   object the real server gave (captured by one untimed warm-up start), so both
   read and write the same bytes. Then stdin is closed and each must exit 0.
2. `--version` and `--help`: from exec to exit (status 0, output on stdout).
   Baseline: `python -c pass` with the same interpreter.
3. What importing pygls alone costs: `python -c "import <the pygls modules the
   server imports>"` minus `python -c pass`, both from exec to exit.

Every process runs without PYTHONDONTWRITEBYTECODE, so the untimed warm-up
start leaves compiled bytecode behind as an installed package has it; else
each start would compile every module of the package again (about 0.1 s).
`--compare CMD` measures a second server command (another checkout, say) in
the same interleaving, for a before/after in one run.

Every measurement is repeated (7 times by default) and the medians are
reported; the repeats are interleaved, so slow drift on the machine (other
work on two shared cores) hits every row alike. Targets: first reply <= 0.3 s,
`--version` and `--help` <= 0.1 s each.

How to run
----------
    .venv/bin/python bench/startup.py [--repeat N] [--server CMD] [--compare CMD]

Exits 0 whether or not the targets are met; 1 on any protocol error, timeout
or misbehaving process.
"""

from __future__ import annotations

import sys  # noqa: I001 -- the path is set before any other import
from pathlib import Path

# Run as `python bench/NAME.py`, imports start at the repository's root, not in
# bench/: `bench.common` is found, and bench/ray.py does not stand in for Ray.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import asyncio
import json
import os
import platform
import shlex
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from bench.common import BenchError, bounded, drain_stderr, start_piped
from bench.ping import BASELINE_SERVER
from bench.runs import Row, default_server, format_table, positive_int

STREAM_LIMIT: Final = 16 * 1024 * 1024
EXIT_TIMEOUT_S: Final = 15.0
PING: Final = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}\n'
# The pygls modules the server imports (rpc/pygls_hooks.py); they bring lsprotocol.types.
PYGLS_IMPORT: Final = "import pygls.protocol, pygls.server"

# Bytecode is written on the warm-up start and read by the timed ones (see above).
ENV: Final = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

TARGET_FIRST_REPLY_S: Final = 0.3
TARGET_CLI_S: Final = 0.1


async def first_reply(argv: Sequence[str]) -> tuple[float, Any]:
    """Seconds from exec to the reply of a `ping` written at once; and its result."""
    started = time.perf_counter()
    proc = await start_piped(argv, "the server", STREAM_LIMIT, ENV)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    tail = bytearray()
    draining = asyncio.create_task(drain_stderr(proc.stderr, tail))
    try:
        proc.stdin.write(PING)
        line = await bounded(proc.stdout.readline(), f"the first reply of {argv[0]}")
        elapsed = time.perf_counter() - started
        proc.stdin.close()
        code = await bounded(proc.wait(), f"{argv[0]} to exit", EXIT_TIMEOUT_S)
        await draining
    finally:
        if proc.returncode is None:
            proc.kill()  # the one process this call started
            await proc.wait()
    stderr = tail.decode(errors="replace").strip()[-500:]
    if code != 0:
        raise BenchError(f"{argv[0]} exited with status {code}; stderr: {stderr or '(empty)'}")
    try:
        reply = json.loads(line)
    except ValueError:
        raise BenchError(f"the first reply is not JSON: {line[:300]!r}") from None
    if not isinstance(reply, dict) or reply.get("id") != 1 or "result" not in reply:
        raise BenchError(f"not a reply to ping: {line[:300]!r}; stderr: {stderr}")
    return elapsed, reply["result"]


async def run_to_exit(argv: Sequence[str]) -> float:
    """Seconds from exec to a clean exit of `argv` (stdin closed, stdout read)."""
    started = time.perf_counter()
    proc = await start_piped(argv, argv[0], STREAM_LIMIT, ENV)
    assert proc.stdin is not None
    proc.stdin.close()
    out, err = await bounded(proc.communicate(), f"{shlex.join(argv)} to exit", EXIT_TIMEOUT_S)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise BenchError(f"{shlex.join(argv)} exited {proc.returncode}: {err[-500:]!r}")
    return elapsed


def detail(text: str) -> None:
    print(f"  {text}", flush=True)


def timings(name: str, values: Sequence[float]) -> None:
    shown = ", ".join(f"{v * 1000:.0f}" for v in values)
    detail(f"{name}: {shown} ms (median {statistics.median(values) * 1000:.1f})")


def server_cases(server: tuple[str, ...], state_dir: str, tag: str) -> dict[str, Callable[[], Any]]:
    served = (*server, "--state-dir", state_dir)
    return {
        f"server{tag}": lambda: first_reply(served),
        f"version{tag}": lambda: run_to_exit((*server, "--version")),
        f"help{tag}": lambda: run_to_exit((*server, "--help")),
    }


def server_rows(med: dict[str, float], tag: str, label: str) -> list[Row]:
    first, version, help_ = med[f"server{tag}"], med[f"version{tag}"], med[f"help{tag}"]
    return [
        Row(
            f"first reply after exec{label}",
            "s",
            first,
            f"<= {TARGET_FIRST_REPLY_S:g} s",
            first <= TARGET_FIRST_REPLY_S,
            med["bare"],
        ),
        Row(f"--version{label}", "s", version, f"<= {TARGET_CLI_S:g} s", version <= TARGET_CLI_S),
        Row(f"--help{label}", "s", help_, f"<= {TARGET_CLI_S:g} s", help_ <= TARGET_CLI_S),
    ]


async def run(server: tuple[str, ...], compare: tuple[str, ...] | None, repeat: int) -> int:
    python = sys.executable
    print(f"machine: python={platform.python_version()} {platform.system()} {platform.machine()}")
    print(f"server: {shlex.join(server)}; {repeat} interleaved runs, medians", flush=True)
    if compare:
        print(f"compared with: {shlex.join(compare)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as state_dir:
        # Warm-up: bytecode, the page cache, the state directory.
        _, result = await first_reply((*server, "--state-dir", state_dir))
        await run_to_exit((*server, "--help"))
        cases = server_cases(server, state_dir, "")
        if compare:
            await first_reply((*compare, "--state-dir", state_dir))
            await run_to_exit((*compare, "--help"))
            cases |= server_cases(compare, state_dir, "-compare")
        bare = (python, "-c", BASELINE_SERVER, json.dumps(result))
        cases |= {
            "bare": lambda: first_reply(bare),
            "pass": lambda: run_to_exit((python, "-c", "pass")),
            "pygls": lambda: run_to_exit((python, "-c", PYGLS_IMPORT)),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeat):
            for name, case in cases.items():
                outcome = await case()
                times[name].append(outcome[0] if isinstance(outcome, tuple) else outcome)
    for name, values in times.items():
        timings(name, values)
    med = {name: statistics.median(values) for name, values in times.items()}
    pygls = med["pygls"] - med["pass"]
    rows = server_rows(med, "", "")
    if compare:
        rows += server_rows(med, "-compare", " (compare)")
    rows += [
        Row("python -c pass", "s", med["pass"], "-", None),
        Row("import pygls (minus pass)", "s", pygls, "-", None),
        Row("first reply minus pygls import", "s", med["server"] - pygls, "-", None, med["bare"]),
    ]
    print()
    print("\n".join(format_table(rows)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=positive_int, default=7, metavar="N")
    parser.add_argument("--server", metavar="CMD", help="server command line to benchmark")
    parser.add_argument("--compare", metavar="CMD", help="a second server command line")
    try:
        args = parser.parse_args(argv)
        server = tuple(shlex.split(args.server)) if args.server else (default_server(),)
        if not server:
            raise BenchError("--server is empty")
        compare = tuple(shlex.split(args.compare)) if args.compare else None
        return asyncio.run(run(server, compare, args.repeat))
    except BenchError as exc:
        print(f"startup bench: FAILED: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
