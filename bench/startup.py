"""Benchmark of the installed subagent-host's start-up: the server's and every face's.

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
2. The server's own cycle, the faces' baseline: the same start, from exec
   until it has answered that one `ping` and exited at the end of its input.
3. The faces, each against that cycle (ratio = face / cycle), on the same
   state directory:
   - `subagent-host run -- true`, from exec to its exit (status 0): it starts
     a server of its own, spawns `true` through it, follows it to its end and
     ends the server, so its floor is the cycle itself;
   - `subagent-host mcp`, from exec to its answer of MCP `initialize` (written
     at once, as an MCP client does); needs the `mcp` extra, else the row is
     left out. Then its stdin is closed and it must exit 0;
   - `subagent-host runs` and `subagent-host show RUN` (a run the warm-up
     `run` made), from exec to exit: they read the state directory and start
     no server.
4. `--version` and `--help`: from exec to exit (status 0, output on stdout).
   Baseline: `python -c pass` with the same interpreter.
5. What importing pygls alone costs: `python -c "import <the pygls modules the
   server imports>"` minus `python -c pass`, both from exec to exit.

Every process runs without PYTHONDONTWRITEBYTECODE, so the untimed warm-up
start leaves compiled bytecode behind as an installed package has it; else
each start would compile every module of the package again (about 0.1 s).
`--compare CMD` measures a second server command (another checkout, say) in
the same interleaving, for a before/after in one run.

6. With `--compare`, the CPU time of each case (user and system, of the process
   and every process it started and reaped: `getrusage(RUSAGE_CHILDREN)` before
   and after; the cases run one at a time, so each delta is that case's alone),
   against the compared command's (ratio = this / compared). On a loaded shared
   machine the wall times scatter by more than two versions differ; CPU time is
   the steadier figure. A server case's CPU time is its whole cycle (ping, exit).

Every measurement is repeated (7 times by default) and the medians are
reported; the repeats are interleaved, so slow drift on the machine (other
work on two shared cores) hits every row alike. Targets: first reply <= 0.3 s,
`--version` and `--help` <= 0.1 s each; `run -- true` <= 1.3 x the cycle, MCP
`initialize` <= 1.6 x the cycle, `runs` and `show` <= 0.15 s each.

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
import resource
import shlex
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import attrs

from bench.common import BenchError, bounded, drain_stderr, start_piped
from bench.ping import BASELINE_SERVER
from bench.runs import Row, default_server, format_table, positive_int

STREAM_LIMIT: Final = 16 * 1024 * 1024
EXIT_TIMEOUT_S: Final = 15.0
PING: Final = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}\n'
# The pygls module the server imports (rpc/errors.py, rpc/dispatch.py); it brings
# lsprotocol.types.
PYGLS_IMPORT: Final = "import pygls.exceptions"

# Bytecode is written on the warm-up start and read by the timed ones (see above).
ENV: Final = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

TARGET_FIRST_REPLY_S: Final = 0.3
TARGET_CLI_S: Final = 0.1
TARGET_RUN_RATIO: Final = 1.3  # `run -- true` against the server's own cycle
TARGET_MCP_RATIO: Final = 1.6  # MCP `initialize` answered, against the same cycle
TARGET_BROWSE_S: Final = 0.15  # `runs`, `show RUN`

# What an MCP client sends first (the SDK's stdio transport: one JSON text a line).
MCP_INITIALIZE: Final = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "startup-bench", "version": "1"},
            },
        }
    ).encode()
    + b"\n"
)
EXIT_NO_MCP_EXTRA: Final = 2  # `subagent-host mcp` without the SDK: one line, status 2


class NoMcpExtra(BenchError):
    """`subagent-host mcp` cannot run here: the `mcp` extra is not installed."""


@attrs.frozen
class Answered:
    """One process sent one request at exec: when it answered, when it exited, and how."""

    reply_s: float
    exit_s: float
    code: int
    line: bytes
    stderr: str


async def answered(argv: Sequence[str], what: str, request: bytes) -> Answered:
    """Start `argv`, write `request` at once, read the first line it answers, close its
    stdin and wait for its exit; both times from exec."""
    started = time.perf_counter()
    proc = await start_piped(argv, what, STREAM_LIMIT, ENV)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    tail = bytearray()
    draining = asyncio.create_task(drain_stderr(proc.stderr, tail))
    try:
        proc.stdin.write(request)
        line = await bounded(proc.stdout.readline(), f"the first answer of {what}")
        reply_s = time.perf_counter() - started
        proc.stdin.close()
        code = await bounded(proc.wait(), f"{what} to exit", EXIT_TIMEOUT_S)
        exit_s = time.perf_counter() - started
        await draining
    finally:
        if proc.returncode is None:
            proc.kill()  # the one process this call started (a child of its sees stdin end)
            await proc.wait()
    return Answered(reply_s, exit_s, code, line, tail.decode(errors="replace").strip()[-500:])


def result_of(done: Answered, what: str, request: str) -> Any:
    """The `result` of the JSON-RPC reply with id 1 that `done` read; a BenchError for a
    process that failed or answered anything else."""
    if done.code != 0:
        raise BenchError(
            f"{what} exited with status {done.code}; stderr: {done.stderr or '(empty)'}"
        )
    try:
        reply = json.loads(done.line)
    except ValueError:
        raise BenchError(f"the answer of {what} is not JSON: {done.line[:300]!r}") from None
    if not isinstance(reply, dict) or reply.get("id") != 1 or "result" not in reply:
        raise BenchError(f"not a reply to {request}: {done.line[:300]!r}; stderr: {done.stderr}")
    return reply["result"]


async def first_reply(argv: Sequence[str]) -> tuple[float, float, Any]:
    """Seconds from exec to the reply of a `ping` written at once, seconds from exec to
    the exit that follows the end of its input (the cycle); and the reply's result."""
    done = await answered(argv, argv[0], PING)
    return done.reply_s, done.exit_s, result_of(done, argv[0], "ping")


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


async def output_of(argv: Sequence[str]) -> str:
    """What `argv` printed on stdout (it must exit 0); untimed."""
    proc = await start_piped(argv, argv[0], STREAM_LIMIT, ENV)
    assert proc.stdin is not None
    proc.stdin.close()
    out, err = await bounded(proc.communicate(), f"{shlex.join(argv)} to exit", EXIT_TIMEOUT_S)
    if proc.returncode != 0:
        raise BenchError(f"{shlex.join(argv)} exited {proc.returncode}: {err[-500:]!r}")
    return out.decode()


async def mcp_initialized(argv: Sequence[str]) -> float:
    """Seconds from exec of the MCP face `argv` to its answer of an `initialize` written
    at once; then its stdin is closed and it must exit 0 (its serve child with it)."""
    done = await answered(argv, "the MCP face", MCP_INITIALIZE)
    if done.code == EXIT_NO_MCP_EXTRA and not done.line:
        raise NoMcpExtra(done.stderr)
    result_of(done, "the MCP face", "initialize")
    return done.reply_s


def detail(text: str) -> None:
    print(f"  {text}", flush=True)


def timings(name: str, values: Sequence[float]) -> None:
    shown = ", ".join(f"{v * 1000:.0f}" for v in values)
    detail(f"{name}: {shown} ms (median {statistics.median(values) * 1000:.1f})")


Case = Callable[[], Awaitable[dict[str, float]]]


def server_cases(server: tuple[str, ...], state_dir: str, tag: str) -> dict[str, Case]:
    served = (*server, "--state-dir", state_dir)

    async def reply_and_cycle() -> dict[str, float]:
        reply, cycle, _ = await first_reply(served)
        return {f"server{tag}": reply, f"cycle{tag}": cycle}

    return {
        f"server{tag}": reply_and_cycle,
        f"version{tag}": timed(f"version{tag}", lambda: run_to_exit((*server, "--version"))),
        f"help{tag}": timed(f"help{tag}", lambda: run_to_exit((*server, "--help"))),
    }


def face_cases(
    server: tuple[str, ...], state_dir: str, run_id: str, tag: str, mcp: bool
) -> dict[str, Case]:
    where = ("--state-dir", state_dir)
    cases = {
        f"run{tag}": timed(
            f"run{tag}", lambda: run_to_exit((*server, "run", *where, "--", "true"))
        ),
        f"runs{tag}": timed(f"runs{tag}", lambda: run_to_exit((*server, "runs", *where))),
        f"show{tag}": timed(f"show{tag}", lambda: run_to_exit((*server, "show", *where, run_id))),
    }
    if mcp:
        cases[f"mcp{tag}"] = timed(f"mcp{tag}", lambda: mcp_initialized((*server, "mcp", *where)))
    return cases


def children_cpu_s() -> float:
    """User and system seconds of every child this process has reaped so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def with_cpu(name: str, case: Case) -> Case:
    """`case`, also reporting as `cpu-NAME` the CPU time of what it started (see 6.)."""

    async def measured() -> dict[str, float]:
        before = children_cpu_s()
        values = await case()
        return values | {f"cpu-{name}": children_cpu_s() - before}

    return measured


def timed(name: str, measure: Callable[[], Awaitable[float]]) -> Case:
    async def case() -> dict[str, float]:
        return {name: await measure()}

    return case


async def warm_up(server: tuple[str, ...], state_dir: str) -> tuple[Any, str, bool]:
    """One untimed pass over every process measured (bytecode, the page cache, the state
    directory): the `ping` result, the id of a run `run` made, whether `mcp` runs here."""
    _, _, result = await first_reply((*server, "--state-dir", state_dir))
    await run_to_exit((*server, "--help"))
    where = ("--state-dir", state_dir)
    await run_to_exit((*server, "run", *where, "--", "true"))
    run_ids = (await output_of((*server, "runs", "-q", *where))).split()
    if not run_ids:
        raise BenchError("`runs -q` lists no run after `run -- true`")
    await run_to_exit((*server, "show", *where, run_ids[0]))
    try:
        await mcp_initialized((*server, "mcp", *where))
    except NoMcpExtra as exc:
        detail(f"{shlex.join(server)} mcp: left out ({exc})")
        return result, run_ids[0], False
    return result, run_ids[0], True


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


def face_rows(med: dict[str, float], tag: str, label: str) -> list[Row]:
    """The faces against the server's own cycle (the baseline column)."""
    cycle = med[f"cycle{tag}"]
    rows = [
        Row(f"server cycle: ping, exit{label}", "s", cycle, "baseline", None),
        Row(
            f"run -- true{label}",
            "s",
            med[f"run{tag}"],
            f"<= {TARGET_RUN_RATIO:g}x cycle",
            med[f"run{tag}"] <= TARGET_RUN_RATIO * cycle,
            cycle,
        ),
    ]
    if f"mcp{tag}" in med:
        rows.append(
            Row(
                f"mcp: initialize answered{label}",
                "s",
                med[f"mcp{tag}"],
                f"<= {TARGET_MCP_RATIO:g}x cycle",
                med[f"mcp{tag}"] <= TARGET_MCP_RATIO * cycle,
                cycle,
            )
        )
    for name, shown in (("runs", "runs"), ("show", "show RUN")):
        value = med[f"{name}{tag}"]
        rows.append(
            Row(
                f"{shown}{label}",
                "s",
                value,
                f"<= {TARGET_BROWSE_S:g} s",
                value <= TARGET_BROWSE_S,
                cycle,
            )
        )
    return rows


async def run(server: tuple[str, ...], compare: tuple[str, ...] | None, repeat: int) -> int:
    python = sys.executable
    print(f"machine: python={platform.python_version()} {platform.system()} {platform.machine()}")
    print(f"server: {shlex.join(server)}; {repeat} interleaved runs, medians", flush=True)
    if compare:
        print(f"compared with: {shlex.join(compare)}", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="startup-bench-") as state_dir,
        tempfile.TemporaryDirectory(prefix="startup-bench-compare-") as compare_dir,
    ):
        result, run_id, mcp = await warm_up(server, state_dir)
        cases = server_cases(server, state_dir, "") | face_cases(server, state_dir, run_id, "", mcp)
        if compare:
            # A state directory of its own: an older server may not read a newer one's.
            _, compared_id, compared_mcp = await warm_up(compare, compare_dir)
            cases |= server_cases(compare, compare_dir, "-compare")
            cases |= face_cases(compare, compare_dir, compared_id, "-compare", compared_mcp)
        bare = (python, "-c", BASELINE_SERVER, json.dumps(result))

        async def bare_reply() -> dict[str, float]:
            reply, _, _ = await first_reply(bare)
            return {"bare": reply}

        if compare:
            cases = {name: with_cpu(name, case) for name, case in cases.items()}
        cases |= {
            "bare": bare_reply,
            "pass": timed("pass", lambda: run_to_exit((python, "-c", "pass"))),
            "pygls": timed("pygls", lambda: run_to_exit((python, "-c", PYGLS_IMPORT))),
        }
        times: dict[str, list[float]] = {}
        for _ in range(repeat):
            for case in cases.values():
                for name, value in (await case()).items():
                    times.setdefault(name, []).append(value)
    for name, values in times.items():
        timings(name, values)
    med = {name: statistics.median(values) for name, values in times.items()}
    pygls = med["pygls"] - med["pass"]
    rows = server_rows(med, "", "")
    if compare:
        rows += server_rows(med, "-compare", " (compare)")
    rows += face_rows(med, "", "")
    if compare:
        rows += face_rows(med, "-compare", " (compare)")
    rows += [
        Row("python -c pass", "s", med["pass"], "-", None),
        Row("import pygls (minus pass)", "s", pygls, "-", None),
        Row("first reply minus pygls import", "s", med["server"] - pygls, "-", None, med["bare"]),
    ]
    if compare:
        rows += cpu_rows(med)
    print()
    print("\n".join(format_table(rows)))
    return 0


CPU_ROWS: Final = (
    ("server", "server cycle"),
    ("version", "--version"),
    ("help", "--help"),
    ("run", "run -- true"),
    ("mcp", "mcp: initialize answered"),
    ("runs", "runs"),
    ("show", "show RUN"),
)


def cpu_rows(med: dict[str, float]) -> list[Row]:
    """CPU time of each case against the compared command's (see 6.): no worse."""
    rows = []
    for name, shown in CPU_ROWS:
        if f"cpu-{name}" in med and f"cpu-{name}-compare" in med:
            value, before = med[f"cpu-{name}"], med[f"cpu-{name}-compare"]
            rows.append(Row(f"CPU: {shown}", "s", value, "<= compare", value <= before, before))
    return rows


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
