"""The state directory's server.log is bounded (terminal/server_log.py): one over 1 MiB
when a `run` starts is rotated to server.log.1, once however many runs start together,
and a `run -v` still shows its own part of the log after another run moved it."""

from __future__ import annotations

import asyncio
import fcntl
import os
import stat
import sys
from pathlib import Path
from typing import Final

import pytest

from subagent_host.state_layout import SERVER_LOG
from subagent_host.terminal.server_log import ROTATE_BYTES, ROTATED_SUFFIX, server_log
from tests.backends.conftest import assert_gone, poll_until

FULL: Final = b"an old line\n" * (ROTATE_BYTES // 12 + 1)  # just over the bound
RUNS_AT_ONCE: Final = 6
START_TIMEOUT_S: Final = 60.0

LOCKS: Final = Path("/proc/locks")
# A run's start, as `run` does it: the log opened (rotated when full), one line written.
# It waits on stdin for the word to go, so that every run starts at the same moment.
ONE_RUN: Final = """
import sys
from pathlib import Path
from subagent_host.terminal.server_log import server_log
sys.stdin.buffer.read(1)
with server_log(Path(sys.argv[1])) as log:
    log.stream.write(sys.argv[2] + "\\n")
"""


def state_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    return directory


def test_a_log_over_the_bound_is_rotated_replacing_the_one_before(tmp_path: Path) -> None:
    state = state_dir(tmp_path)
    (state / SERVER_LOG).write_bytes(FULL)
    (state / (SERVER_LOG + ROTATED_SUFFIX)).write_bytes(b"the oldest lines\n")
    with server_log(state) as log:
        log.stream.write("this run\n")
    assert (state / (SERVER_LOG + ROTATED_SUFFIX)).read_bytes() == FULL
    assert (state / SERVER_LOG).read_text() == "this run\n"
    assert stat.S_IMODE((state / SERVER_LOG).stat().st_mode) == 0o600


def test_a_log_within_the_bound_is_appended_to(tmp_path: Path) -> None:
    state = state_dir(tmp_path)
    kept = FULL[: ROTATE_BYTES - 1]
    (state / SERVER_LOG).write_bytes(kept)
    with server_log(state) as log:
        log.stream.write("this run\n")
    assert (state / SERVER_LOG).read_bytes() == kept + b"this run\n"
    assert not (state / (SERVER_LOG + ROTATED_SUFFIX)).exists()


def test_a_rename_that_fails_leaves_the_log_written_on(tmp_path: Path) -> None:
    state = state_dir(tmp_path)
    (state / SERVER_LOG).write_bytes(FULL)
    (state / (SERVER_LOG + ROTATED_SUFFIX)).mkdir()  # nothing can be renamed over it
    (state / (SERVER_LOG + ROTATED_SUFFIX) / "kept").touch()
    with server_log(state) as log:
        log.stream.write("this run\n")
    assert (state / SERVER_LOG).read_bytes() == FULL + b"this run\n"


def test_verbose_replays_this_runs_part_after_another_run_rotated_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    state = state_dir(tmp_path)
    with server_log(state) as first:
        first.stream.write("first run starts\n")
        first.stream.write(FULL.decode())
        first.stream.flush()
        with server_log(state) as second:  # it finds the log full: rotated under the first
            second.stream.write("second run\n")
        first.stream.write("first run ends\n")
        capfd.readouterr()
        first.replay()
    shown = capfd.readouterr().err
    assert shown.startswith("first run starts\n") and shown.endswith("first run ends\n")
    assert "second run" not in shown
    assert (state / SERVER_LOG).read_text() == "second run\n"


async def test_runs_starting_at_once_rotate_the_full_log_once_and_lose_no_line(
    tmp_path: Path,
) -> None:
    state = state_dir(tmp_path)
    (state / SERVER_LOG).write_bytes(FULL)
    lines = [f"run {index} " + "x" * 2000 for index in range(RUNS_AT_ONCE)]
    runs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            ONE_RUN,
            str(state),
            line,
            stdin=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for line in lines
    ]
    try:
        for run in runs:  # each has its imports done by now, or soon: then they all go
            assert run.stdin is not None
            run.stdin.write(b"g")
            await run.stdin.drain()
            run.stdin.close()
        async with asyncio.timeout(START_TIMEOUT_S):
            ended = [await run.communicate() for run in runs]
    finally:
        for run in runs:
            if run.returncode is None:
                run.kill()  # by pid: a process this test started
                await run.wait()
    await assert_gone([run.pid for run in runs])
    assert [(run.returncode, err) for run, (_out, err) in zip(runs, ended, strict=True)] == [
        (0, b"")
    ] * RUNS_AT_ONCE
    assert (state / (SERVER_LOG + ROTATED_SUFFIX)).read_bytes() == FULL
    assert sorted((state / SERVER_LOG).read_text().splitlines()) == sorted(lines)


def waits_for_a_lock(pid: int) -> bool:
    """Whether process `pid` is blocked in `flock` (Linux lists each waiter after `->`)."""
    return any(
        line.split()[1:3] == ["->", "FLOCK"] and line.split()[5] == str(pid)
        for line in LOCKS.read_text().splitlines()
    )


@pytest.mark.skipif(not LOCKS.exists(), reason="waiters are seen in Linux's /proc/locks")
async def test_a_run_that_opened_the_log_as_another_rotated_it_writes_to_the_new_one(
    tmp_path: Path,
) -> None:
    state = state_dir(tmp_path)
    log, rotated = state / SERVER_LOG, state / (SERVER_LOG + ROTATED_SUFFIX)
    log.write_bytes(FULL)
    with log.open("ab") as other:  # another run, about to rotate the full log
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        run = await asyncio.create_subprocess_exec(
            sys.executable, "-c", ONE_RUN, str(state), "this run", stdin=asyncio.subprocess.PIPE
        )
        try:
            assert run.stdin is not None
            run.stdin.write(b"g")
            await run.stdin.drain()
            assert await poll_until(lambda: waits_for_a_lock(run.pid), START_TIMEOUT_S)
            os.replace(log, rotated)  # the other run's rotation, and its line
            log.write_text("other run\n")
            log.chmod(0o600)
            fcntl.flock(other.fileno(), fcntl.LOCK_UN)
            async with asyncio.timeout(START_TIMEOUT_S):
                await run.wait()
        finally:
            if run.returncode is None:
                run.kill()  # by pid: the process this test started
                await run.wait()
    await assert_gone([run.pid])
    assert run.returncode == 0
    assert (log.read_text(), rotated.read_bytes()) == ("other run\nthis run\n", FULL)
