"""Nothing left behind by any run, however it ends: every process shape, in every tracking mode.

Each test runs a real server forced into one process tracking mode
(`--process-tracking`; cgroup is skipped where this host has no writable
cgroup v2 hierarchy), records the pids its processes report, and proves each
one is gone — exited and reaped, not a zombie — once the run (or the server)
has ended. What a mode does not guarantee (protocol.md §8.3, §13) is skipped
with the reason. Graces are short: the shapes are what is tested, not patience.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any, Final

import psutil
import pytest

from subagent_host.backends import cgroups
from tests.backends.conftest import assert_gone
from tests.e2e.gone_server import still_runs, stubborn_leftover
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    ServerProcess,
    kill_with_its_guardian,
    result_of,
    running_server,
    state_args,
)

FAKES: Final = Path(__file__).resolve().parent.parent / "fakes"
MODES: Final = ["cgroup", "subreaper", "marker"]
GRACE_MS: Final = "300"
# The shapes, each reporting the pid it leaves on stdout.
SETSID_QUIET: Final = "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; exit 0"
ENV_CLEARED: Final = "(env -i setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!); sleep 1000"
NO_MARKER_REASON: Final = (
    "without cgroups, a process that left its tree and cleared its environment is found "
    "only by a live subreaper (protocol.md §8.3)"
)


def fake(name: str, *args: str) -> list[str]:
    return [sys.executable, str(FAKES / name), *args]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    if request.param == "cgroup" and cgroups.find_hierarchy() is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    return str(request.param)


def server_args(tmp_path: Path, mode: str) -> tuple[str, ...]:
    return (*state_args(tmp_path), "--process-tracking", mode, "--grace-ms", GRACE_MS)


async def completed(server: ServerProcess, command: list[str]) -> dict[str, Any]:
    """Run `command` to its end (task mode); return its only child's snapshot."""
    run = await result_of(server, "spawn", {"command": command, "mode": "task"})
    assert run["status"] == "completed", run
    child: dict[str, Any] = run["children"][0]
    return child


async def started(server: ServerProcess, command: list[str]) -> tuple[str, list[int]]:
    """Start `command` in the background; return its run id and the pids it prints first."""
    await server.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "spawn",
            "params": {"command": command, "stream": True},
        }
    )
    run_id, text = None, ""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while run_id is None or "\n" not in text:  # the output may come before the reply
            message = await server.receive()
            params = message.get("params", {})
            if message.get("id") == 1:
                run_id = message["result"]["runId"]
            elif message.get("method") == "run/event" and params.get("type") == "output":
                text += params["text"]
    return run_id, pids_in(text)


def pids_in(text: str) -> list[int]:
    return [int(word) for word in text.split() if word.isdigit()]


def tree_of(run_id: str) -> list[int]:
    """Every live process carrying the run's marker (the tree shapes report no pids)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("SUBAGENT_HOST_RUN_ID") == run_id:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


async def stopped(server: ServerProcess, run_id: str) -> dict[str, Any]:
    run = await result_of(server, "stop", {"runId": run_id, "graceMs": int(GRACE_MS)})
    assert run["status"] == "cancelled", run
    return run


# --- a run that completes ----------------------------------------------------------------


async def test_a_setsid_child_with_stdio_on_dev_null_is_ended_when_its_run_completes(
    tmp_path: Path, mode: str
) -> None:
    async with running_server(*server_args(tmp_path, mode)) as server:
        child = await completed(server, ["sh", "-c", SETSID_QUIET])
        await assert_gone(pids_in(child["output"]["text"]))
        assert child["resources"]["leftoversEnded"] == 1
        assert (await server.finish())[0] == 0


async def test_a_double_forked_daemon_is_ended_when_its_run_completes(
    tmp_path: Path, mode: str
) -> None:
    async with running_server(*server_args(tmp_path, mode)) as server:
        child = await completed(server, fake("escapes.py", "detach"))
        await assert_gone(pids_in(child["output"]["text"]))
        assert child["resources"]["leftoversEnded"] == 1
        assert (await server.finish())[0] == 0


@pytest.mark.parametrize("script", ["sleep 1000 & echo $!", "setsid sleep 1000 & echo $!"])
async def test_a_grandchild_holding_stdout_is_ended_when_its_run_completes(
    tmp_path: Path, mode: str, script: str
) -> None:
    async with running_server(*server_args(tmp_path, mode)) as server:
        child = await completed(server, ["sh", "-c", script])
        await assert_gone(pids_in(child["output"]["text"]))
        assert child["resources"]["leftoversEnded"] == 1
        assert (await server.finish())[0] == 0


async def test_a_run_that_leaves_nothing_reports_no_leftovers(tmp_path: Path, mode: str) -> None:
    async with running_server(*server_args(tmp_path, mode)) as server:
        child = await completed(server, ["true"])
        assert child["resources"]["leftoversEnded"] == 0
        assert (await server.finish())[0] == 0


# --- a run that is stopped ---------------------------------------------------------------


async def test_an_escaper_that_cleared_its_environment_is_ended_by_stop(
    tmp_path: Path, mode: str
) -> None:
    if mode == "marker":
        pytest.skip(NO_MARKER_REASON)
    async with running_server(*server_args(tmp_path, mode)) as server:
        run_id, pids = await started(server, ["sh", "-c", ENV_CLEARED])
        await stopped(server, run_id)
        await assert_gone(pids)
        assert (await server.finish())[0] == 0


@pytest.mark.parametrize(
    "command",
    [
        fake("tree.py", "5"),
        fake("tree.py", "3", "--ignore-term"),
        fake("escapes.py", "setsid"),
        fake("escapes.py", "daemon"),
    ],
    ids=["term-honouring-tree", "term-ignoring-tree", "setsid-escaper", "double-fork"],
)
async def test_a_stopped_run_leaves_no_process_of_any_shape(
    tmp_path: Path, mode: str, command: list[str]
) -> None:
    async with running_server(*server_args(tmp_path, mode)) as server:
        run_id, reported = await started(server, command)
        pids = sorted({*reported, *tree_of(run_id)})
        run = await stopped(server, run_id)
        await assert_gone(pids)
        assert run["children"][0]["resources"]["leftoversEnded"] == len(pids) - 1
        assert (await server.finish())[0] == 0


# --- the server ends while runs are live --------------------------------------------------


def live_shapes(mode: str, *, crash: bool) -> list[list[str]]:
    """One background run per shape this mode guarantees to end when the server ends."""
    shapes = [fake("tree.py", "3"), fake("escapes.py", "setsid"), fake("escapes.py", "daemon")]
    # A live subreaper still finds the escaper that cleared its environment; after a
    # crash only a cgroup does.
    if mode == "cgroup" or (mode == "subreaper" and not crash):
        shapes.append(["sh", "-c", ENV_CLEARED])
    return shapes


async def start_every_shape(server: ServerProcess, mode: str, *, crash: bool) -> list[int]:
    pids: list[int] = []
    for command in live_shapes(mode, crash=crash):
        run_id, reported = await started(server, command)
        pids += [*reported, *tree_of(run_id)]
    return sorted(set(pids))


@pytest.mark.parametrize("ending", ["stdin-eof", "sigterm"])
async def test_a_server_that_ends_leaves_no_process_of_its_runs(
    tmp_path: Path, mode: str, ending: str
) -> None:
    async with running_server(*server_args(tmp_path, mode)) as server:
        pids = await start_every_shape(server, mode, crash=False)
        if ending == "sigterm":
            server.signal(signal.SIGTERM)
        code, _ = await server.finish()
        assert code == 0
        await assert_gone(pids)


async def test_a_sigkilled_servers_processes_are_ended_by_the_next_server(
    tmp_path: Path, mode: str
) -> None:
    # Its guardian killed with it: what the guardian would end is left to the next server.
    async with running_server(*server_args(tmp_path, mode)) as first:
        pids = await start_every_shape(first, mode, crash=True)
        kill_with_its_guardian(first)
        assert await asyncio.wait_for(first.proc.wait(), EXIT_TIMEOUT_S) == -signal.SIGKILL
        taken = set(first.run_ids)
        first.run_ids.clear()  # the next server ends them
    async with running_server(*server_args(tmp_path, mode)) as second:
        second.run_ids |= taken
        await assert_gone(pids, timeout_s=EXIT_TIMEOUT_S)
        assert (await second.finish())[0] == 0


async def test_a_sigkilled_servers_cgroups_are_swept_from_another_state_directory(
    tmp_path: Path,
) -> None:
    if cgroups.find_hierarchy() is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    async with running_server(*server_args(tmp_path / "one", "cgroup")) as first:
        pids = await start_every_shape(first, "cgroup", crash=True)
        kill_with_its_guardian(first)
        assert await asyncio.wait_for(first.proc.wait(), EXIT_TIMEOUT_S) == -signal.SIGKILL
        first.run_ids.clear()  # no database the next server reads knows them
    async with running_server(*server_args(tmp_path / "two", "cgroup")) as second:
        await assert_gone(pids, timeout_s=EXIT_TIMEOUT_S)
        assert (await second.finish())[0] == 0


# --- truthful figures ----------------------------------------------------------------------


async def test_true_reports_no_more_than_its_own_small_peak(tmp_path: Path, mode: str) -> None:
    async with running_server(*server_args(tmp_path, mode)) as server:
        child = await completed(server, ["true"])
        # Never the server's own size, which the fork carries until exec.
        assert child["resources"]["peakRssBytes"] < 10_000_000, child
        assert (await server.finish())[0] == 0


async def test_a_child_holding_100_mb_for_over_2_s_reports_its_peak(
    tmp_path: Path, mode: str
) -> None:
    async with running_server(*server_args(tmp_path, mode)) as server:
        child = await completed(server, fake("escapes.py", "memory", "100", "2.5"))
        assert child["resources"]["peakRssBytes"] > 90_000_000, child
        assert (await server.finish())[0] == 0


async def test_cpu_seconds_cover_a_grandchild_the_child_never_reaped(
    tmp_path: Path, mode: str
) -> None:
    async with running_server(*server_args(tmp_path, mode)) as server:
        child = await completed(server, fake("escapes.py", "burn", "2.5"))
        # cgroup: the cgroup's own total; otherwise the last sample (one a second) saw most.
        least = 2.2 if mode == "cgroup" else 1.2
        assert child["resources"]["cpuSeconds"] >= least, child
        assert (await server.finish())[0] == 0


async def test_ping_is_answered_while_a_gone_servers_leftover_is_still_being_ended(
    tmp_path: Path,
) -> None:
    # The leftover ignores SIGTERM: ending it takes the whole grace, then SIGKILL.
    async with stubborn_leftover(tmp_path) as leftover:
        async with running_server(*state_args(tmp_path), "--grace-ms", "8000") as second:
            assert (await result_of(second, "ping", {}))["persistence"] == "sqlite"
            assert still_runs(leftover)  # the ping was answered beside the sweep
            await assert_gone([leftover.pid], timeout_s=EXIT_TIMEOUT_S + 8)
            assert (await second.finish())[0] == 0
