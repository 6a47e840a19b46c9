"""A server that exits while it still ends what a gone server left (a process that ignores
SIGTERM, in the gone server's cgroup) does not wait out that process's grace: it hands
the rest to its guardian, which ends it when the grace is over, removes the cgroup and
exits (protocol.md §13). What the store records as pending stays for the next server.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Final

import psutil
import pytest

from subagent_host.backends import cgroups
from subagent_host.state_layout import DB_NAME
from tests.e2e.gone_server import instance_cgroup_of, still_runs, stubborn_leftover
from tests.e2e.harness import EXIT_TIMEOUT_S, guardians_of, running_server, state_args
from tests.waits import still_running

pytestmark = pytest.mark.e2e

# Far longer than a server takes to exit (EXIT_TIMEOUT_S is the bound asserted).
LONG_GRACE_MS: Final = "60000"
SHORT_GRACE_MS: Final = "3000"


@pytest.fixture(autouse=True)
def _cgroups() -> None:
    if cgroups.find_hierarchy() is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")


def pending_cleanups(state_dir: Path) -> list[str]:
    """The runs whose processes the store still records as to be ended (read only)."""
    with sqlite3.connect(f"file:{state_dir / DB_NAME}?mode=ro", uri=True) as db:
        return [run_id for (run_id,) in db.execute("SELECT run_id FROM cleanups")]


async def test_a_server_exits_within_a_gone_servers_leftovers_grace_leaving_it_to_its_guardian(
    tmp_path: Path,
) -> None:
    async with stubborn_leftover(tmp_path, "cgroup") as leftover:
        instance = instance_cgroup_of(leftover)
        async with running_server(*state_args(tmp_path), "--grace-ms", LONG_GRACE_MS) as second:
            await second.close_stdin()
            # Well within the 60 s the leftover is given (and `run` waits for its server).
            assert await asyncio.wait_for(second.proc.wait(), EXIT_TIMEOUT_S) == 0
            (guardian,) = guardians_of(second.pid)  # outlives its server, in the grace
            assert still_runs(leftover) and instance.exists()
            leftover.kill()  # by pid: the leftover this test made; the grace need not end
            assert await still_running([guardian], EXIT_TIMEOUT_S) == []
        assert not instance.exists()  # emptied, so the guardian removed it
        # Its stderr a pipe, the guardian said what it would do, and let go of it.
        said = f"server {second.pid} handed over ending 1 process left by gone servers"
        assert f"{said}: SIGKILL to what is left in " in second.stderr_text, second.stderr_text


async def test_the_guardian_ends_the_leftover_after_its_grace_and_the_next_server_the_rest(
    tmp_path: Path,
) -> None:
    async with stubborn_leftover(tmp_path, "cgroup") as leftover:
        instance = instance_cgroup_of(leftover)
        log = tmp_path / "server.log"
        args = (*state_args(tmp_path), "--grace-ms", SHORT_GRACE_MS, "--log-file", str(log))
        async with running_server(*args) as second:
            assert (await second.finish())[0] == 0
            guardians = guardians_of(second.pid)
            gone, _ = await asyncio.to_thread(psutil.wait_procs, [leftover], EXIT_TIMEOUT_S)
            assert gone == [leftover]
            assert await still_running(guardians, EXIT_TIMEOUT_S) == []
        assert not instance.exists()
        # A log file is held to the end: the line says what was done.
        said = f"server {second.pid} handed over ending 1 process left by gone servers"
        assert f"{said}: SIGKILL to the 1 left after the grace\n" in log.read_text()
    # The gone server's run is still to be cleaned up: the next server does it.
    assert pending_cleanups(tmp_path) != []
    async with running_server(*state_args(tmp_path), "--grace-ms", SHORT_GRACE_MS) as third:
        await third.request("ping")  # its clean-up runs beside serving: nothing is left now
        assert (await third.finish())[0] == 0
    assert pending_cleanups(tmp_path) == []
