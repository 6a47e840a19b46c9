"""`run` with a gone server's leftover on its state directory: the server's log lines stay
in the state directory's server.log (stderr holds errors only; `-v` shows them), the
run's output is printed while the server is still ending that leftover, and `run` exits
without waiting out the leftover's grace: its server's guardian ends it (protocol.md §13).
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Final

import pytest

from subagent_host.state_layout import SERVER_LOG
from tests.backends.conftest import assert_gone, poll_until
from tests.e2e.gone_server import guardians_logging_to, still_runs, stubborn_leftover
from tests.e2e.harness import EXIT_TIMEOUT_S
from tests.terminal.test_run import assert_nothing_survives, run_argv
from tests.waits import still_running

pytestmark = pytest.mark.e2e

# Long enough that ending the leftover (it ignores SIGTERM) outlasts a whole `run -- echo`.
GRACE_MS: Final = 8000
# Far longer than `run -- true` takes, which waits for its server to exit.
LONG_GRACE_MS: Final = 60000
# The guardian's line once it has ended what its server handed over (backends/guardian.py).
SWEPT: Final = re.compile(
    r"^(\S+ \S+) WARNING \S+: server \d+ handed over ending 1 process left by gone servers: "
    r"SIGKILL to the 1 left after the grace$",
    re.M,
)
MARKED: Final = "marked 1 run of an ended server process interrupted"


def settings(tmp_path: Path, grace_ms: int = GRACE_MS) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"grace_ms": grace_ms}))
    return path


async def run_beside_a_leftover(
    tmp_path: Path, *options: str
) -> tuple[int, bytes, bytes, float, bool]:
    """`run OPTIONS -- echo hello` on a state directory a gone server left a process on:
    its exit status, stdout, stderr, when its output arrived, and whether the leftover
    still ran then."""
    state_dir = tmp_path / "state"
    async with stubborn_leftover(state_dir) as leftover:
        argv = run_argv(state_dir, "--config", str(settings(tmp_path)), *options)
        process = await asyncio.create_subprocess_exec(
            *argv,
            "--",
            "echo",
            "hello",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(EXIT_TIMEOUT_S + GRACE_MS / 1000):
                assert process.stdout is not None
                first = await process.stdout.readline()
                arrived = datetime.now().timestamp()
                leftover_ran = still_runs(leftover)
                rest, stderr = await process.communicate()
        finally:
            if process.returncode is None:
                process.kill()  # by pid: the one process this test started
                await process.wait()
        await assert_gone([leftover.pid], timeout_s=EXIT_TIMEOUT_S)
        # The guardian of `run`'s server ended it, and exits: nothing of it survives either.
        guardians = guardians_logging_to(state_dir / SERVER_LOG)
        assert await still_running(guardians, EXIT_TIMEOUT_S) == []
    assert_nothing_survives(state_dir)
    assert process.returncode is not None
    return process.returncode, first + rest, stderr, arrived, leftover_ran


def logged_at(log: str, line: re.Pattern[str]) -> float:
    """When the log line matching `line` was written (its text format's local time)."""
    (stamp,) = line.findall(log)
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


async def test_run_prints_its_output_before_a_gone_servers_leftover_is_ended_and_logs_nothing(
    tmp_path: Path,
) -> None:
    status, stdout, stderr, arrived, leftover_ran = await run_beside_a_leftover(tmp_path)
    assert (status, stdout, stderr) == (0, b"hello\n", b""), stderr.decode()
    path = tmp_path / "state" / SERVER_LOG
    # The guardian writes its line once the leftover is gone and its cgroups removed.
    assert await poll_until(lambda: SWEPT.search(path.read_text()) is not None, EXIT_TIMEOUT_S)
    log = path.read_text()
    # The run's runs are marked first, the leftover is ended beside the run: after its output.
    assert MARKED in log
    assert leftover_ran and arrived < logged_at(log, SWEPT), log


async def test_run_verbose_shows_the_servers_log_lines_on_stderr(tmp_path: Path) -> None:
    status, stdout, stderr, _arrived, _ran = await run_beside_a_leftover(tmp_path, "-v")
    assert (status, stdout) == (0, b"hello\n")
    shown = stderr.decode()
    assert f"WARNING subagent_host.store.recovery: {MARKED}" in shown, shown


async def test_run_exits_long_before_a_gone_servers_leftover_has_had_its_grace(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    async with stubborn_leftover(state_dir) as leftover:
        argv = run_argv(state_dir, "--config", str(settings(tmp_path, LONG_GRACE_MS)))
        process = await asyncio.create_subprocess_exec(
            *argv,
            "--",
            "true",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            # Well within the 60 s of grace the leftover is given.
            async with asyncio.timeout(EXIT_TIMEOUT_S):
                stdout, stderr = await process.communicate()
        finally:
            if process.returncode is None:
                process.kill()  # by pid: the one process this test started
                await process.wait()
        assert (process.returncode, stdout, stderr) == (0, b"", b""), stderr.decode()
        # Its server has exited; its guardian ends the leftover once the grace is over.
        (guardian,) = guardians_logging_to(state_dir / SERVER_LOG)
        assert still_runs(leftover)
        leftover.kill()  # by pid: the leftover this test made; the grace need not end
        assert await still_running([guardian], EXIT_TIMEOUT_S) == []
        await assert_gone([leftover.pid])
    assert_nothing_survives(state_dir)


async def test_a_server_that_cannot_start_still_has_its_line_shown_and_no_log_is_left_there(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    state_dir.chmod(0o777)  # others can write to it: the server refuses it (§13)
    process = await asyncio.create_subprocess_exec(
        *run_argv(state_dir, "--", "true"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        stdout, stderr = await process.communicate()
    assert (process.returncode, stdout) == (2, b"")
    assert stderr.decode().startswith("subagent-host: the state directory is not safe to use")
    assert stderr.count(b"\n") == 1
    assert list(state_dir.iterdir()) == []  # not even the log
