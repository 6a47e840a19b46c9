"""Servers on one cgroup hierarchy in different PID namespaces (protocol.md §8.3, §13).

A server started with `unshare --pid --fork --mount-proc` sees no process of
the host's namespace, so a pid tells it nothing about another server: a live
server's instance cgroup is known by the lock its server holds. Skipped where
this machine cannot make a PID namespace or has no writable cgroup v2 hierarchy.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Final

import psutil
import pytest

from subagent_host.backends import cgroups
from tests.backends.conftest import assert_gone, poll_until
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    result_of,
    running_server,
    server_executable,
    state_args,
)
from tests.e2e.test_leftovers import started

UNSHARE: Final = ("unshare", "--pid", "--fork", "--mount-proc")


async def pid_namespaces_or_skip() -> cgroups.Hierarchy:
    hierarchy = cgroups.find_hierarchy()
    if hierarchy is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) on this machine")
    tried = await asyncio.create_subprocess_exec(
        *UNSHARE, "true", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, error = await asyncio.wait_for(tried.communicate(), EXIT_TIMEOUT_S)
    if tried.returncode != 0:
        pytest.skip(f"this machine cannot make a PID namespace: {error.decode().strip()}")
    return hierarchy


async def gone_servers_cgroup_with_a_process(hierarchy: cgroups.Hierarchy) -> tuple[Path, int]:
    """An instance cgroup of a server that is gone in every namespace (no process started
    at tick 1; an older server's name, so any server's sweep takes it), one process in it."""
    instance = hierarchy.root / f"i{os.getpid()}-1"
    group = instance / "run-0-1"
    group.mkdir(parents=True)
    script = f"(echo 0 > {group}/cgroup.procs; exec sleep 1000) >/dev/null & echo $!"
    shell = await asyncio.create_subprocess_exec("sh", "-c", script, stdout=asyncio.subprocess.PIPE)
    orphan = int((await asyncio.wait_for(shell.communicate(), EXIT_TIMEOUT_S))[0])
    assert await poll_until(lambda: str(orphan) in (group / "cgroup.procs").read_text().split())
    return instance, orphan


def cgroup_of(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup", encoding="utf-8") as lines:
        return lines.read()


async def test_a_server_in_another_pid_namespace_leaves_a_live_servers_runs_alone(
    tmp_path: Path,
) -> None:
    hierarchy = await pid_namespaces_or_skip()
    args = ("--process-tracking", "cgroup")
    async with running_server(*state_args(tmp_path / "a"), *args) as first:
        run_id, pids = await started(first, ["sh", "-c", "sleep 1000 & echo $$ $!; wait"])
        # What the second server's start-up sweep surely takes: once it is removed, that
        # sweep is over, and would have ended the first server's run with it.
        gone, orphan = await gone_servers_cgroup_with_a_process(hierarchy)
        program = (*UNSHARE, server_executable())
        async with running_server(*state_args(tmp_path / "b"), *args, program=program) as second:
            await assert_gone([orphan], timeout_s=EXIT_TIMEOUT_S)
            assert await poll_until(lambda: not gone.exists(), EXIT_TIMEOUT_S)
            pong = await result_of(second, "ping", {})
            assert pong["processTracking"] == "cgroup"
            assert (await second.finish())[0] == 0
        assert all(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
        status = await result_of(first, "status", {"runId": run_id})
        assert status["status"] == "running", status
        assert (await result_of(first, "ping", {}))["processTracking"] == "cgroup"
        # And it still starts children in cgroups of its own.
        _, (later,) = await started(first, ["sh", "-c", "echo $$; exec sleep 1000"])
        ticks = cgroups.start_ticks(first.proc.pid)
        assert ticks is not None
        instance = cgroups.instance_name(first.proc.pid, ticks)
        assert f"/{instance}/" in cgroup_of(later)
        assert (await first.finish())[0] == 0
