"""A server that dies outright takes its runs along (protocol.md §8.3, §13).

Each test runs a real server forced into one process tracking mode (cgroup is
skipped where this host has no writable cgroup v2 hierarchy), starts runs whose
processes report their pids, SIGKILLs the server and, with no other server
started, proves that its guardian sent SIGTERM to every process of every run (a
tree that honours SIGTERM records that it got one) and SIGKILL to whatever
ignored it. Only then does a next server start, and it still marks the runs
`interrupted`. Waits are bounded and generous: the grace is one second, but a
loaded machine is never asked to be fast.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from pathlib import Path
from typing import Any, Final, NamedTuple

import psutil
import pytest

from subagent_host.backends import cgroups
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

MODES: Final = ["cgroup", "subreaper", "marker"]
# Not the runs' own grace: a dead server's runs get the guardian's one second.
GRACE_MS: Final = "30000"
# Honours SIGTERM: says so in the file named by $0, then exits; its sleep dies of it.
HONOURING: Final = 'trap "echo term >>\\"$0\\"; exit 0" TERM; sleep 1000 & echo $$ $!; wait'
# Ignores SIGTERM, as do its sleep and a grandchild in a session of its own.
IGNORING: Final = "trap '' TERM; sleep 1000 & a=$!; setsid sleep 1000 & echo $$ $a $!; wait"
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
    """Two runs of a server and every pid their trees reported."""

    honouring: str
    ignoring: str
    pids: list[int]


async def start_both_trees(server: ServerProcess, flag: Path) -> Trees:
    """A run whose tree honours SIGTERM (and writes `flag` on it), one whose tree ignores it."""
    honouring, honouring_pids = await started(server, ["sh", "-c", HONOURING, str(flag)])
    ignoring, ignoring_pids = await started(server, ["sh", "-c", IGNORING])
    assert len(honouring_pids) == 2 and len(ignoring_pids) == 3
    return Trees(honouring, ignoring, honouring_pids + ignoring_pids)


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
    flag = tmp_path / "got-sigterm"
    async with running_server(*server_args(tmp_path, mode, "--log-format", "json")) as server:
        trees = await start_both_trees(server, flag)
        taken = await kill_server(server)
        assert taken == {trees.honouring, trees.ignoring}
        # No other server runs: the dead server's guardian alone ends both trees.
        await assert_gone(trees.pids, ENDED_WITHIN_S)
        assert flag.read_text() == "term\n"  # the honouring shell got its SIGTERM
    # The guardian wrote its line to the server's log, in the server's format, then left.
    told = [json.loads(line) for line in server.stderr_text.splitlines() if "guardian" in line]
    assert [(entry["level"], entry["logger"]) for entry in told] == [
        ("WARNING", "subagent_host.backends.guardian")
    ], told
    message = told[0]["message"]
    assert f"server {server.pid} died" in message, message
    # The three that ignored SIGTERM needed SIGKILL (on a loaded machine, maybe more).
    assert int(re.search(r"SIGKILL to the (\d+) left", message)[1]) >= 3, message  # type: ignore[index]
    await assert_interrupted_by_the_next_server(tmp_path, mode, taken)


async def test_runs_end_when_the_server_is_sigkilled_inside_its_own_stop_grace(
    tmp_path: Path, mode: str
) -> None:
    # A client that closes stdin and SIGKILLs the server moments later: the server is
    # still waiting out its runs' grace, and its guardian ends them all the same.
    flag = tmp_path / "got-sigterm"
    async with running_server(*server_args(tmp_path, mode, "--log-level", "INFO")) as server:
        trees = await start_both_trees(server, flag)
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
    flag = tmp_path / "got-sigterm"
    async with running_server(*server_args(tmp_path, "subreaper")) as server:
        trees = await start_both_trees(server, flag)
        first = await the_guardian_of(server)
        os.kill(first, signal.SIGKILL)  # by pid: the guardian of the server this test started
        second = await the_guardian_of(server, other_than=first)
        # The server goes on, and so do its runs.
        assert (await result_of(server, "ping", {}))["pong"] is True
        for run_id in (trees.honouring, trees.ignoring):
            assert (await result_of(server, "status", {"runId": run_id}))["status"] == "running"
        assert all(psutil.pid_exists(pid) for pid in trees.pids)
        assert not flag.exists()
        assert f"guardian of this server's runs (pid {first}) exited (SIGKILL)" in (
            server.stderr_text
        )
        # The new guardian was told of the runs started before it.
        taken = await kill_server(server)
        await assert_gone(trees.pids, ENDED_WITHIN_S)
        assert flag.read_text() == "term\n"
        assert second not in [p.pid for p in guardians_of(server.pid)]  # it left, its job done
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
