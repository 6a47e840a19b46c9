"""A server that dies outright takes its runs along (protocol.md §8.3, §13).

Each test runs a real server forced into one process tracking mode (cgroup is
skipped where this host has no writable cgroup v2 hierarchy), starts runs whose
processes report their pids, SIGKILLs the server and, with no other server
started, proves that its guardian sent SIGTERM to every process of every run and
SIGKILL to whatever ignored it. Only then does a next server start, and it still
marks the runs `interrupted`. Waits are bounded and generous: the grace is one
second, but a loaded machine is never asked to be fast.

How each process ended is read from the kernel, not from what a process had time to
do: the test adopts the dead server's orphans (it is a child subreaper meanwhile) and
reaps them. A process that keeps SIGTERM's default action is ended by it the moment
it is delivered (a SIGKILL sent after is dropped), so its status says SIGTERM came
first however late it is scheduled; one that ignores SIGTERM dies of the SIGKILL. (A
SIGTERM trap that writes a file must run within the guardian's one second, which a
loaded machine does not always give it.) In cgroup mode the test also holds the dead
server's instance locked until its guardian is done: any server starting on the host
(another suite's) would otherwise sweep those cgroups beside the guardian, with a
grace of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import re
import signal
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final, NamedTuple

import psutil
import pytest

from subagent_host.backends import cgroups, tracking
from tests.backends.conftest import assert_gone, poll_until
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    ServerProcess,
    guardians_of,
    result_of,
    running_server,
    state_args,
)
from tests.e2e.test_leftovers import started
from tests.waits import still_running

MODES: Final = ["cgroup", "subreaper", "marker"]
SYS_PIDFD_GETFD: Final = 438  # the same number on every Linux architecture
# Not the runs' own grace: a dead server's runs get the guardian's one second.
GRACE_MS: Final = "30000"
# Honours SIGTERM (its default action), as does its child: both die of it. The shell
# becomes a sleep, which never reaps its child: how each ended is the test's to read.
HONOURING: Final = "sleep 1000 & echo $$ $!; exec sleep 1000"
# Ignores SIGTERM, as do its sleep and a grandchild in a session of its own (an ignored
# signal stays ignored across exec).
IGNORING: Final = (
    "trap '' TERM; sleep 1000 & a=$!; setsid sleep 1000 & echo $$ $a $!; exec sleep 1000"
)
# Time for the guardian to end everything: far more than its one-second grace.
ENDED_WITHIN_S: Final = 15.0


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    if request.param == "cgroup" and cgroups.find_hierarchy() is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    return str(request.param)


def server_args(state: Path, mode: str, *extra: str, grace_ms: str = GRACE_MS) -> tuple[str, ...]:
    return (*state_args(state), "--process-tracking", mode, "--grace-ms", grace_ms, *extra)


class Trees(NamedTuple):
    """Two runs of a server and the pids their trees reported (each child's shell first)."""

    honouring: str
    ignoring: str
    honouring_pids: list[int]
    ignoring_pids: list[int]

    @property
    def pids(self) -> list[int]:
        return self.honouring_pids + self.ignoring_pids


async def start_both_trees(server: ServerProcess) -> Trees:
    """A run whose tree honours SIGTERM, one whose tree ignores it."""
    honouring, honouring_pids = await started(server, ["sh", "-c", HONOURING])
    ignoring, ignoring_pids = await started(server, ["sh", "-c", IGNORING])
    assert len(honouring_pids) == 2 and len(ignoring_pids) == 3
    return Trees(honouring, ignoring, honouring_pids, ignoring_pids)


@contextlib.contextmanager
def adopting_orphans() -> Iterator[None]:
    """This process adopts its descendants' orphans meanwhile (a child subreaper): the
    processes of a server SIGKILLed then become its children, to be reaped by `reaped`."""
    assert tracking.set_subreaper(True)
    try:
        yield
    finally:
        tracking.set_subreaper(False)


@contextlib.contextmanager
def holding_its_instance(server: ServerProcess, mode: str) -> Iterator[None]:
    """In cgroup mode, a share of the server's lock on its instance cgroup, taken from the
    server (pidfd_getfd: the same open file, so the same flock), which outlives it until
    the end of the block: any server starting on this host meanwhile (another suite's)
    takes the instance for alive, and does not sweep the dead server's runs beside its
    guardian. Nothing in other modes: no other server ends those runs."""
    if mode != "cgroup":
        yield
        return
    name = cgroups.instance_name(server.pid, cgroups.start_ticks(server.pid) or 0)
    [target] = [fd for fd, path in open_files(server.pid) if path.name == name]
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(server.pid)
    try:
        lock = libc.syscall(SYS_PIDFD_GETFD, pidfd, target, 0)
        assert lock >= 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(pidfd)
    try:
        yield
    finally:
        os.close(lock)


def open_files(pid: int) -> Iterator[tuple[int, Path]]:
    """The descriptors the process has open, and what each names (one closed meanwhile is
    left out)."""
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            yield int(entry.name), Path(os.readlink(entry))


async def reaped(pids: Iterable[int], timeout_s: float) -> dict[int, int | None]:
    """Wait for each process to end, in order, and reap it if it is this process's child:
    by pid, the signal that killed it, or None (it exited, or another process reaped it).

    A process's children come here when it ends: reap a parent before its children."""
    ended: dict[int, int | None] = {}
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            left = await still_running([psutil.Process(pid)], timeout_s)
            assert left == [], f"process {pid} still running after {timeout_s} s"
        ended[pid] = killed_by(pid)
    return ended


def killed_by(pid: int) -> int | None:
    """Reap `pid`, which has ended: the signal that killed it, None if it exited or is not
    this process's child (its own parent reaped it)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG)
    except ChildProcessError:
        return None
    if info is None or info.si_code not in (os.CLD_KILLED, os.CLD_DUMPED):
        return None
    return info.si_status


async def assert_sigterm_then_sigkill(
    server: ServerProcess, mode: str, trees: Trees, guardian: int
) -> set[str]:
    """SIGKILL the server, with this process adopting its orphans, and prove from how each
    of them ended that the guardian sent SIGTERM to the trees first, then SIGKILL to what
    ignored it, and left itself. Returns the runs the server had."""
    with holding_its_instance(server, mode), adopting_orphans():
        taken = await kill_server(server)
        # No other server runs: the dead server's guardian alone ends both trees, then
        # exits (its parent was the server: it is reaped here too).
        ended = await reaped([*trees.pids, guardian], ENDED_WITHIN_S)
    # SIGTERM reached each honouring process before any SIGKILL (which it would have died
    # of), however late it was scheduled to die; the others needed the SIGKILL.
    assert [ended[pid] for pid in trees.honouring_pids] == [signal.SIGTERM] * 2, ended
    assert [ended[pid] for pid in trees.ignoring_pids] == [signal.SIGKILL] * 3, ended
    assert ended[guardian] is None, ended  # it exited, its job done
    await assert_gone([*trees.pids, guardian], ENDED_WITHIN_S)
    return taken


async def kill_server(server: ServerProcess) -> set[str]:
    """SIGKILL the server; its runs, handed to the caller, are checked by the test."""
    server.signal(signal.SIGKILL)
    assert await asyncio.wait_for(server.proc.wait(), EXIT_TIMEOUT_S) == -signal.SIGKILL
    taken = set(server.run_ids)
    server.run_ids.clear()  # their processes are the guardian's to end, not a next server's
    return taken


async def assert_interrupted_by_the_next_server(
    state: Path, mode: str, run_ids: set[str], *, or_cancelled: frozenset[str] = frozenset()
) -> None:
    """A next server marks the runs `interrupted` (one of `or_cancelled` may have ended
    `cancelled` before the server died)."""
    async with running_server(*server_args(state, mode)) as server:
        for run_id in run_ids:
            run = await result_of(server, "status", {"runId": run_id})
            if run_id in or_cancelled and run["status"] == "cancelled":
                continue
            assert run["status"] == "interrupted", run
            assert run["reason"].startswith("server-died"), run
        assert (await server.finish())[0] == 0


async def the_guardian_of(server: ServerProcess, other_than: int | None = None) -> int:
    """The pid of the server's running guardian (one other than `other_than`: a new one)."""
    found: list[psutil.Process] = []

    def one_is_running() -> bool:
        found[:] = [p for p in guardians_of(server.pid) if p.pid != other_than]
        return len(found) == 1

    assert await poll_until(one_is_running, EXIT_TIMEOUT_S), guardians_of(server.pid)
    return found[0].pid


async def test_a_sigkilled_servers_runs_get_sigterm_then_sigkill_with_no_other_server(
    tmp_path: Path, mode: str
) -> None:
    async with running_server(*server_args(tmp_path, mode, "--log-format", "json")) as server:
        trees = await start_both_trees(server)
        guardian = await the_guardian_of(server)
        taken = await assert_sigterm_then_sigkill(server, mode, trees, guardian)
        assert taken == {trees.honouring, trees.ignoring}
    # The guardian wrote its line to the server's log, in the server's format, then left.
    told = [json.loads(line) for line in server.stderr_text.splitlines() if "guardian" in line]
    assert [(entry["level"], entry["logger"]) for entry in told] == [
        ("WARNING", "subagent_host.backends.guardian")
    ], told
    message = told[0]["message"]
    assert f"server {server.pid} died" in message, message
    # The three that ignored SIGTERM needed SIGKILL (on a loaded machine, maybe more).
    killed = re.search(r"SIGKILL to the (\d+) left", message)
    assert killed is not None and int(killed[1]) >= 3, message
    await assert_interrupted_by_the_next_server(tmp_path, mode, taken)


async def test_runs_end_when_the_server_is_sigkilled_inside_its_own_stop_grace(
    tmp_path: Path, mode: str
) -> None:
    # A client that closes stdin and SIGKILLs the server moments later: the server is
    # still waiting out its runs' grace, and its guardian ends them all the same.
    async with running_server(*server_args(tmp_path, mode, "--log-level", "INFO")) as server:
        trees = await start_both_trees(server)
        await server.close_stdin()
        assert await poll_until(lambda: "SIGTERM sent to its tree" in server.stderr_text)
        taken = await kill_server(server)
        await assert_gone(trees.pids, ENDED_WITHIN_S)
    # The tree that honoured the server's own SIGTERM may have ended before its death.
    await assert_interrupted_by_the_next_server(
        tmp_path, mode, taken, or_cancelled=frozenset({trees.honouring})
    )


async def test_a_guardian_killed_on_its_own_is_replaced_and_the_runs_still_end_with_the_server(
    tmp_path: Path,
) -> None:
    async with running_server(*server_args(tmp_path, "subreaper")) as server:
        trees = await start_both_trees(server)
        first = await the_guardian_of(server)
        os.kill(first, signal.SIGKILL)  # by pid: the guardian of the server this test started
        second = await the_guardian_of(server, other_than=first)
        # The server goes on, and so do its runs.
        assert (await result_of(server, "ping", {}))["pong"] is True
        for run_id in (trees.honouring, trees.ignoring):
            assert (await result_of(server, "status", {"runId": run_id}))["status"] == "running"
        assert all(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in trees.pids)
        assert f"guardian of this server's runs (pid {first}) exited (SIGKILL)" in (
            server.stderr_text
        )
        # The new guardian was told of the runs started before it.
        taken = await assert_sigterm_then_sigkill(server, "subreaper", trees, second)
    await assert_interrupted_by_the_next_server(tmp_path, "subreaper", taken)


async def test_a_clean_exit_leaves_no_guardian_and_its_runs_get_their_own_grace(
    tmp_path: Path, mode: str
) -> None:
    async with running_server(*server_args(tmp_path, mode, grace_ms="300")) as server:
        run_id, pids = await started(server, ["sh", "-c", IGNORING])
        guardian = await the_guardian_of(server)
        code, rest = await server.finish()
        assert code == 0
        # The server waited for its guardian (told `bye`) and reaped it before exiting.
        assert not psutil.pid_exists(guardian)
        await assert_gone(pids)
    ended: list[dict[str, Any]] = [
        message["params"]
        for message in rest
        if message.get("method") == "run/event" and message["params"]["type"] == "status"
    ]
    assert ended[-1]["status"] == "cancelled" and ended[-1]["runId"] == run_id, ended
    assert "guardian" not in server.stderr_text


async def test_a_sigkilled_servers_guardian_ends_a_process_in_a_cgroup_its_child_made(
    tmp_path: Path,
) -> None:
    hierarchy = cgroups.find_hierarchy()
    if hierarchy is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    # A cgroup below the child's own, and in it a process in a session of its own
    # that cleared its environment: only the cgroup tree still finds it.
    script = (
        'cg="$0$(sed -n "s/^0:://p" /proc/self/cgroup)/made-by-the-child"; mkdir "$cg" && '
        '(echo 0 > "$cg/cgroup.procs"; exec setsid env -i sleep 1000) '
        "</dev/null >/dev/null 2>&1 & echo $$ $!; exec sleep 1000"
    )
    async with running_server(*server_args(tmp_path, "cgroup")) as server:
        _, pids = await started(server, ["sh", "-c", script, str(hierarchy.mount)])
        assert len(pids) == 2
        taken = await kill_server(server)
        await assert_gone(pids, ENDED_WITHIN_S)
    await assert_interrupted_by_the_next_server(tmp_path, "cgroup", taken)
