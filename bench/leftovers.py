"""Benchmark of what runs leave behind: survivors per process shape, in every tracking mode.

What is measured
----------------
For each process tracking mode (`--process-tracking cgroup`, `subreaper`,
`marker`; `cgroup` is skipped, with a note, where the server refuses it on this
host) the installed server is started with a throw-away `--state-dir`, one
`--session` (so a later server on that directory can answer `status` for the
runs of an earlier one), `--grace-ms 300` and `--max-concurrency 6` (every live
run of 10-13 at once), and every process shape runs through it:

 1. a run that completes while a `setsid` child with stdio on /dev/null lives on;
 2. the same with a Python double fork (`tests/fakes/escapes.py detach`);
 3. an escaper that clears its environment
    (`(env -i setsid sleep 1000 ... &); sleep 1000`), stopped;
 4. a SIGTERM-honouring tree of 5 (`tests/fakes/tree.py 5`), stopped;
 5. a SIGTERM-ignoring tree of 3 (`tree.py 3 --ignore-term`), stopped;
 6. a `setsid` escaper whose parent still runs (`escapes.py setsid`), stopped;
 7. a double-forked daemon (`escapes.py daemon`), stopped;
 8. a grandchild holding stdout open (`sleep 1000 & echo $!`), the run completes;
 9. the same grandchild after `setsid`;
10. the server's stdin closed while runs are live: a tree of 3, a `setsid`
    escaper and a double fork (10), and the escaper of shape 3 (10b);
11. the same runs live when the server gets SIGTERM (11, 11b);
12. the same runs live when the server gets SIGKILL, then a new server on the
    same state directory (12, 12b);
13. the same runs live when the server gets SIGKILL and no other server starts
    (13, 13b): survivors are counted once none is left or 3 s after the SIGKILL
    (its guardian sends SIGTERM, waits 1 s, sends SIGKILL), and only then is a
    new server started, to read `leftoversEnded`.

The live runs of 10-13 are a tree of 3 that honours SIGTERM, a tree of 3 that
ignores it, a `setsid` escaper and a double fork, and apart (b) the escaper of
shape 3.

Shapes 1-9 share one server per mode (each one ends before the next starts);
10-13 each start their own. A shape's processes are known by the pids they
print and by a scan of every process's environment for the marker
`SUBAGENT_HOST_RUN_ID=<runId>` of its runs, while they run and again after. A
*survivor* is one of them still alive (not a zombie) once its run, or its
server, has ended: counted when the stop or spawn reply has come (or the server
has exited), after at most 1 s more for the kernel to finish what the server
sent. After the SIGKILL (12) they are counted once the new server has answered
a `ping` and nothing is left, or 10 s have passed: its start-up clean-up may run
after that reply. Next to the count is the child's `resources.leftoversEnded`
(for 10-13 as a later server's `status` reports it, summed over the runs; `-`
where no child reports one). Each shape's detail line lists the pids it printed,
every process of it seen (a zombie not yet reaped included), those alive at the
reply (or the server's exit), the survivors, and `leftoversEnded` per run.

A cell that protocol.md §8.3 and §13 do not promise for its mode is marked "not
guaranteed" and not counted as a failure: without cgroups, a process that left
its tree and cleared its environment is found only by a live subreaper, so
shapes 3, 10b and 11b in `marker` mode, and 12b and 13b in `subreaper` and
`marker` mode.

Whatever survives a shape is killed by this bench when the shape is measured,
by pid (psutil checks that the pid was not reused), never by name; a last scan
for the marker of every run checks that nothing is left.

How to run
----------
    .venv/bin/python bench/leftovers.py [--modes cgroup,subreaper,marker] [--server CMD]

Exits 0 whatever the counts (the figures are the point); 1 when the bench
itself breaks: a protocol error, a timeout, or a process it could not clean up.
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
import os
import platform
import shlex
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

import psutil

from bench.common import BenchError, bounded
from bench.runs import (
    EXIT_TIMEOUT_S,
    RUN_ID_VAR,
    Json,
    Server,
    close_server,
    default_server,
    detail,
    request,
    run_id_of,
    start_server,
    write_line,
)

FAKES: Final = Path(__file__).resolve().parent.parent / "tests" / "fakes"
MODES: Final = ("cgroup", "subreaper", "marker")
GRACE_MS: Final = 300
SESSION: Final = "leftovers-bench"
# The kernel may still be ending what the server killed when its reply arrives.
SETTLE_S: Final = 1.0
# After a SIGKILL the next server's start-up clean-up may outlast its first reply.
RESTART_SETTLE_S: Final = 10.0
# After a SIGKILL with no other server: the dead server's guardian gives its runs 1 s
# between SIGTERM and SIGKILL; this is when the survivors were first measured.
ALONE_SETTLE_S: Final = 3.0
POLL_S: Final = 0.05
FIRST_LINE_TIMEOUT_S: Final = 15.0
# The shapes of issue 11, each printing the pid it leaves (escapes.py: "ready PID").
SETSID_QUIET: Final = "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; exit 0"
ENV_CLEARED: Final = "(env -i setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!); sleep 1000"
# Cells protocol.md §8.3/§13 promise nothing for: an escaper that cleared its
# environment is found without cgroups only by a live subreaper.
NOT_GUARANTEED: Final = frozenset(
    {
        ("3", "marker"),
        ("10b", "marker"),
        ("11b", "marker"),
        ("12b", "subreaper"),
        ("12b", "marker"),
        ("13b", "subreaper"),
        ("13b", "marker"),
    }
)


def fake(name: str, *args: str) -> list[str]:
    return [sys.executable, str(FAKES / name), *args]


def pids_in(text: str) -> list[int]:
    return [int(word) for word in text.split() if word.isdigit()]


# --- the processes of a shape ------------------------------------------------------------


def is_alive(proc: psutil.Process) -> bool:
    """Running, not a zombie, and still the process first seen under this pid."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@dataclass
class Tracked:
    """Every process one shape's runs started that this bench has seen."""

    run_ids: set[str] = field(default_factory=set)
    procs: dict[int, psutil.Process] = field(default_factory=dict)
    reported: list[int] = field(default_factory=list)  # the pids the shape printed
    # A printed pid that belongs to a process older than the shape is not its own.
    since: float = field(default_factory=time.time)

    def add_pids(self, pids: Iterable[int]) -> None:
        for pid in pids:
            self.reported.append(pid)
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.create_time() >= self.since - 1.0:
                    self.procs.setdefault(pid, proc)

    def scan(self) -> None:
        """Add every live process carrying the marker of one of this shape's runs."""
        for proc in psutil.process_iter():
            try:
                if proc.pid != os.getpid() and proc.environ().get(RUN_ID_VAR) in self.run_ids:
                    self.procs.setdefault(proc.pid, proc)
            except psutil.Error:
                continue

    def alive(self) -> list[psutil.Process]:
        self.scan()
        return [proc for proc in self.procs.values() if is_alive(proc)]


Alive = list[list[psutil.Process]]  # per group


async def survivors(groups: Sequence[Tracked], settle_s: float) -> tuple[Alive, Alive]:
    """What is alive of each group at once, and once nothing is or `settle_s` has passed."""
    deadline = time.monotonic() + settle_s
    first: Alive | None = None
    while True:
        alive = [await asyncio.to_thread(group.alive) for group in groups]
        first = alive if first is None else first
        if not any(alive) or time.monotonic() >= deadline:
            return first, alive
        # Nothing reports the end of a process that is not ours: poll, bounded.
        await asyncio.sleep(POLL_S)


async def kill_all(groups: Sequence[Tracked]) -> None:
    """Kill what is left of these groups, by pid; a process that stays is a BenchError."""
    for group in groups:
        for proc in await asyncio.to_thread(group.alive):
            with contextlib.suppress(psutil.Error):
                proc.kill()
    _, left = await survivors(groups, EXIT_TIMEOUT_S)
    if any(left):
        pids = [proc.pid for group in left for proc in group]
        raise BenchError(f"processes still alive after SIGKILL: {pids}")


def describe(procs: Iterable[psutil.Process]) -> str:
    return ", ".join(str(proc.pid) for proc in sorted(procs, key=lambda p: p.pid)) or "none"


def seen(track: Tracked) -> str:
    printed = ", ".join(map(str, track.reported)) or "none"
    return f"printed pids {printed}, seen {describe(track.procs.values())}"


# --- talking to the server -------------------------------------------------------------


def child_of(run: Json) -> Json:
    children = run.get("children")
    if not isinstance(children, list) or not children or not isinstance(children[0], dict):
        raise BenchError(f"a run without children: {run!r:.300}")
    child: Json = children[0]
    return child


def leftovers_of(run: Json) -> int | None:
    resources = child_of(run).get("resources")
    value = resources.get("leftoversEnded") if isinstance(resources, dict) else None
    return value if isinstance(value, int) else None


def expect(run: Json, status: str, what: str) -> None:
    if run.get("status") != status:
        raise BenchError(f"{what}: status {run.get('status')!r}, not {status!r}: {run!r:.400}")


async def completed(server: Server, command: list[str], track: Tracked) -> Json:
    """Run `command` to its end (task mode); track the pids it printed."""
    run = await request(server, "spawn", {"command": command, "mode": "task"})
    track.run_ids.add(run_id_of(run))
    expect(run, "completed", shlex.join(command))
    output = child_of(run).get("output")
    track.add_pids(pids_in(str(output.get("text", "")) if isinstance(output, dict) else ""))
    return run


def output_text(server: Server, run_id: str) -> str:
    events = server.events.get(run_id, [])
    return "".join(str(e.get("text", "")) for e in events if e.get("type") == "output")


async def started(server: Server, command: list[str], track: Tracked) -> str:
    """Start `command` in the background; once it printed a line, track its processes."""
    run_id = run_id_of(await request(server, "spawn", {"command": command, "stream": True}))
    track.run_ids.add(run_id)
    async with server.changed:
        await bounded(
            server.changed.wait_for(
                lambda: server.failure is not None or "\n" in output_text(server, run_id)
            ),
            f"waiting for the first line of {shlex.join(command)}",
            FIRST_LINE_TIMEOUT_S,
        )
    if server.failure is not None:
        raise server.failure
    track.add_pids(pids_in(output_text(server, run_id)))
    await asyncio.to_thread(track.scan)
    return run_id


async def stopped(server: Server, command: list[str], track: Tracked) -> Json:
    run_id = await started(server, command, track)
    run = await request(server, "stop", {"runId": run_id, "graceMs": GRACE_MS})
    expect(run, "cancelled", f"stop of {shlex.join(command)}")
    return run


async def first_ping(server: Server) -> Json:
    """`request(server, "ping", {})` for a server that may exit at once.

    Its reply future is failed when stdout closes, possibly after writing the ping
    already failed: marked retrieved here, so asyncio does not log it as lost.
    """
    msg_id, server.next_id = server.next_id, server.next_id + 1
    reply: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
    reply.add_done_callback(lambda done: done.cancelled() or done.exception())
    server.pending[msg_id] = reply
    await write_line(server, {"jsonrpc": "2.0", "id": msg_id, "method": "ping", "params": {}})
    return await bounded(reply, "waiting for the first ping's reply")


async def open_server(argv: Sequence[str], mode: str) -> Server | None:
    """A started server in `mode`, answered one `ping`; None when it refuses the mode."""
    server = await start_server(argv)
    try:
        pong = await first_ping(server)
    except BenchError:
        with contextlib.suppress(BenchError):
            await bounded(server.proc.wait(), "waiting for a refusing server", EXIT_TIMEOUT_S)
        if server.proc.returncode == 2:  # §7: a forced mode the host cannot provide
            await close_server(server)
            refusal = server.stderr_tail.decode(errors="replace").strip()[-300:]
            detail(f"{mode}: the server refuses this mode on this host ({refusal}); skipped")
            return None
        await close_server(server)
        raise
    if pong.get("processTracking") != mode:
        await close_server(server)
        raise BenchError(f"asked for {mode} tracking, ping says {pong.get('processTracking')!r}")
    return server


async def end_server(server: Server, ending: str) -> int:
    """End the server by closing stdin or by a signal; return its exit status. After a
    SIGKILL the exit is seen once its guardian, which holds its stderr, is done too.
    `SIGKILL alone`: it was sent already (`killed_alone`)."""
    server.closing = True
    if ending == "stdin EOF":
        server.stdin.close()
    elif ending != "SIGKILL alone":
        server.proc.send_signal(signal.SIGTERM if ending == "SIGTERM" else signal.SIGKILL)
    try:
        code = await bounded(server.proc.wait(), f"waiting for exit after {ending}", EXIT_TIMEOUT_S)
    except BenchError:
        server.proc.kill()  # the one process this bench started
        await server.proc.wait()
        raise
    server.stdin.close()
    await asyncio.wait(server.tasks, timeout=EXIT_TIMEOUT_S)
    for task in server.tasks:
        task.cancel()
    return code


async def killed_alone(server: Server, groups: Sequence[Tracked]) -> tuple[Alive, Alive, float]:
    """SIGKILL the server and, with no other server started, count what is alive at once
    and once nothing is or `ALONE_SETTLE_S` has passed; also how long that took."""
    server.closing = True
    server.proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    first, left = await survivors(groups, ALONE_SETTLE_S)
    took = time.monotonic() - killed_at
    await end_server(server, "SIGKILL alone")
    return first, left, took


async def leftovers_after(argv: Sequence[str], mode: str, runs: Sequence[str]) -> list[int | None]:
    """Each run's `leftoversEnded` as a new server on the same state directory reports it."""
    server = await open_server(argv, mode)
    if server is None:
        raise BenchError(f"the server refused {mode} tracking the second time")
    try:
        return [leftovers_of(await request(server, "status", {"runId": r})) for r in runs]
    finally:
        await close_server(server)


# --- the shapes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    survivors: int
    leftovers: int | None
    guaranteed: bool

    def text(self) -> str:
        ended = "-" if self.leftovers is None else str(self.leftovers)
        return f"{self.survivors} [{ended}]" + ("" if self.guaranteed else " not guaranteed")


RunShape = Callable[[Server, Tracked], Awaitable[Json]]


def completes(command: list[str]) -> RunShape:
    return lambda server, track: completed(server, command, track)


def stops(command: list[str]) -> RunShape:
    return lambda server, track: stopped(server, command, track)


# Shapes 1-9: one run each, on the mode's shared server.
RUN_SHAPES: Final[tuple[tuple[str, str, RunShape], ...]] = (
    ("1", "completes, setsid child on /dev/null", completes(["sh", "-c", SETSID_QUIET])),
    ("2", "completes, Python double fork", completes(fake("escapes.py", "detach"))),
    ("3", "stop, env -i setsid escaper", stops(["sh", "-c", ENV_CLEARED])),
    ("4", "stop, TERM-honouring tree of 5", stops(fake("tree.py", "5"))),
    ("5", "stop, TERM-ignoring tree of 3", stops(fake("tree.py", "3", "--ignore-term"))),
    ("6", "stop, setsid escaper, parent running", stops(fake("escapes.py", "setsid"))),
    ("7", "stop, double fork", stops(fake("escapes.py", "daemon"))),
    ("8", "completes, grandchild holds stdout", completes(["sh", "-c", "sleep 1000 & echo $!"])),
    (
        "9",
        "completes, setsid grandchild holds stdout",
        completes(["sh", "-c", "setsid sleep 1000 & echo $!"]),
    ),
)
# Shapes 10-13: runs live while the server ends; the env -i escaper counted apart (b).
LIVE_SHAPES: Final = (
    fake("tree.py", "3"),
    fake("tree.py", "3", "--ignore-term"),
    fake("escapes.py", "setsid"),
    fake("escapes.py", "daemon"),
)
ENDINGS: Final = (
    ("10", "stdin EOF", "stdin EOF, tree + escaper + fork live", "stdin EOF, env -i escaper live"),
    ("11", "SIGTERM", "server SIGTERM, same runs live", "server SIGTERM, env -i escaper live"),
    ("12", "SIGKILL", "SIGKILL + new server, same runs", "SIGKILL + new server, env -i escaper"),
    ("13", "SIGKILL alone", "SIGKILL, no other server, 3 s", "SIGKILL alone, env -i escaper"),
)
SHAPE_NAMES: Final = {
    **{key: name for key, name, _ in RUN_SHAPES},
    **{k: n for key, _, name, b_name in ENDINGS for k, n in ((key, name), (f"{key}b", b_name))},
}
# Every run of this bench, for the last check that nothing of them is left.
SEEN_RUNS: Final[set[str]] = set()


async def run_shape(server: Server, mode: str, key: str, shape: RunShape) -> Cell:
    track = Tracked()
    try:
        run = await shape(server, track)
        first, left = await survivors([track], SETTLE_S)
        cell = Cell(len(left[0]), leftovers_of(run), (key, mode) not in NOT_GUARANTEED)
        detail(
            f"{mode} {key}: {seen(track)}; alive at the reply {describe(first[0])}; "
            f"survivors {describe(left[0])}; leftoversEnded {cell.leftovers}"
        )
        return cell
    finally:
        SEEN_RUNS.update(track.run_ids)
        await kill_all([track])


def total(values: Iterable[int | None]) -> int | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


async def ending_shape(argv: Sequence[str], mode: str, key: str, ending: str) -> dict[str, Cell]:
    """Live runs of every shape, then the server ends by `ending`; count what survives."""
    live, escaper = Tracked(), Tracked()
    groups = [live, escaper]
    server = await open_server(argv, mode)
    if server is None:
        raise BenchError(f"the server refused {mode} tracking the second time")
    try:
        live_runs = [await started(server, command, live) for command in LIVE_SHAPES]
        escaper_run = await started(server, ["sh", "-c", ENV_CLEARED], escaper)
        gone_in = ""
        if ending == "SIGKILL alone":
            first, left, took = await killed_alone(server, groups)
            gone_in = f" (all gone {took:.2f} s after it)" if not any(left) else ""
            ended = await leftovers_after(argv, mode, [*live_runs, escaper_run])
        elif ending == "SIGKILL":
            await end_server(server, ending)
            restarted = await open_server(argv, mode)
            if restarted is None:
                raise BenchError(f"the server refused {mode} tracking after the restart")
            try:
                first, left = await survivors(groups, RESTART_SETTLE_S)
                runs = [*live_runs, escaper_run]
                ended = [
                    leftovers_of(await request(restarted, "status", {"runId": r})) for r in runs
                ]
            finally:
                problem = await close_server(restarted)
                if problem:
                    detail(f"{mode} {key}: the new server: {problem}")
        else:
            code = await end_server(server, ending)
            if code != 0:
                detail(f"{mode} {key}: the server exited {code} after {ending}")
            first, left = await survivors(groups, SETTLE_S)
            ended = await leftovers_after(argv, mode, [*live_runs, escaper_run])
        cells: dict[str, Cell] = {}
        when = {
            "SIGKILL": "after the new server's ping",
            "SIGKILL alone": "at the SIGKILL",
        }.get(ending, "at exit")
        for index, (name, group, counts) in enumerate(
            ((key, live, ended[:-1]), (f"{key}b", escaper, ended[-1:]))
        ):
            alive = left[index]
            cells[name] = Cell(len(alive), total(counts), (name, mode) not in NOT_GUARANTEED)
            detail(
                f"{mode} {name}: {seen(group)}; alive {when} {describe(first[index])}; "
                f"survivors {describe(alive)}{gone_in}; leftoversEnded {counts}"
            )
        return cells
    finally:
        if server.proc.returncode is None:
            server.proc.kill()  # the one process this bench started
            await server.proc.wait()
        SEEN_RUNS.update(live.run_ids | escaper.run_ids)
        await kill_all(groups)


async def bench_mode(opts: Options, mode: str) -> dict[str, Cell] | None:
    """Every shape in `mode`; None when the server refuses the mode on this host."""
    with tempfile.TemporaryDirectory(prefix="leftovers-bench-") as state_dir:
        argv = [
            *opts.server,
            *("--state-dir", state_dir, "--session", SESSION),
            *("--process-tracking", mode, "--grace-ms", str(GRACE_MS)),
            *("--max-concurrency", str(len(LIVE_SHAPES) + 1)),  # every live run at once
        ]
        server = await open_server(argv, mode)
        if server is None:
            return None
        cells: dict[str, Cell] = {}
        try:
            for key, _, shape in RUN_SHAPES:
                cells[key] = await run_shape(server, mode, key, shape)
        finally:
            problem = await close_server(server)
            if problem:
                raise BenchError(problem)
        for key, ending, _, _ in ENDINGS:
            cells |= await ending_shape(argv, mode, key, ending)
        return cells


# --- report and command line -----------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    server: tuple[str, ...]
    modes: tuple[str, ...]


def format_table(results: dict[str, dict[str, Cell] | None]) -> list[str]:
    width = 22
    names = 6 + max(len(name) for name in SHAPE_NAMES.values())
    header = f"{'shape':<{names}}" + "".join(f"{mode:<{width}}" for mode in results)
    lines = [header.rstrip(), "-" * len(header)]
    for key, name in SHAPE_NAMES.items():
        row = f"{key + '.':<5}{name:<{names - 5}}"
        for cells in results.values():
            row += f"{'unavailable' if cells is None else cells[key].text():<{width}}"
        lines.append(row.rstrip())
    lines.append("-" * len(header))
    for label, kept in (
        ("total survivors", lambda _: True),
        ("  where guaranteed", lambda cell: cell.guaranteed),
    ):
        row = f"{label:<{names}}"
        for cells in results.values():
            text = (
                "-" if cells is None else str(sum(c.survivors for c in cells.values() if kept(c)))
            )
            row += f"{text:<{width}}"
        lines.append(row.rstrip())
    lines.append(
        "cell: survivors [resources.leftoversEnded]; 'not guaranteed': protocol.md §8.3/§13 "
        "promise nothing for that shape in that mode"
    )
    return lines


async def run(opts: Options) -> int:
    print(
        f"machine: nproc={os.cpu_count()} python={platform.python_version()} "
        f"{platform.system()} {platform.machine()}\n"
        f"server: {shlex.join(opts.server)} --grace-ms {GRACE_MS}",
        flush=True,
    )
    results: dict[str, dict[str, Cell] | None] = {}
    for mode in opts.modes:
        print(f"{mode} tracking", flush=True)
        results[mode] = await bench_mode(opts, mode)
    print("\n".join(["", *format_table(results)]))
    # The last check: each shape killed its survivors, so nothing may carry a marker now.
    left = await asyncio.to_thread(Tracked(run_ids=set(SEEN_RUNS), since=0.0).alive)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    if left:
        raise BenchError(f"processes of these runs left after the bench, killed: {describe(left)}")
    return 0


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--server", metavar="CMD", help="server command line to measure")
    parser.add_argument(
        "--modes", default=",".join(MODES), metavar="LIST", help="tracking modes, comma-separated"
    )
    args = parser.parse_args(argv)
    server = tuple(shlex.split(args.server)) if args.server else (default_server(),)
    modes = tuple(mode for mode in args.modes.split(",") if mode)
    unknown = [mode for mode in modes if mode not in MODES]
    if not server or unknown or not modes:
        parser.error(f"--server must not be empty and --modes a subset of {','.join(MODES)}")
    return Options(server=server, modes=modes)


def main(argv: Sequence[str] | None = None) -> int:
    started_at = time.perf_counter()
    try:
        code = asyncio.run(run(parse_args(argv)))
    except BenchError as exc:
        print(f"leftovers bench: FAILED: {exc}", file=sys.stderr)
        code = 1
    print(f"(took {time.perf_counter() - started_at:.1f} s)")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
