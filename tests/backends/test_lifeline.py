"""The server's end of the lifeline (backends/lifeline.py), in this process: the guardian
it starts, replaces and says goodbye to are real processes.

Every test ends with every child told ended and a `bye`, so each guardian exits at
once (or once the sweep handed to it is done) and is reaped here: none outlives its test.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from typing import Final

import psutil
import pytest

from subagent_host.backends import cgroups, lifeline
from subagent_host.backends.lifeline import Guardian, GuardianLog, SweepLeft
from subagent_host.backends.supervisor import RUN_MARKER
from tests.backends.conftest import poll_until

WAIT_S: Final = 30.0


@pytest.fixture
async def guardian() -> AsyncIterator[Guardian]:
    made = Guardian(None, GuardianLog(fd=None))
    made.start()
    try:
        yield made
    finally:
        await made.aclose()


async def replaced(guardian: Guardian, first: int) -> int:
    """The pid of the guardian started in place of `first`."""
    assert await poll_until(lambda: guardian.pid not in (None, first), WAIT_S)
    assert guardian.pid is not None
    return guardian.pid


async def test_a_guardian_killed_on_its_own_is_reaped_and_replaced(guardian: Guardian) -> None:
    first = guardian.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)  # by pid: the guardian this test started
    await replaced(guardian, first)
    assert not psutil.pid_exists(first)  # reaped, not a zombie


async def test_a_guardian_that_stops_reading_is_killed_and_replaced(
    guardian: Guardian, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifeline, "MAX_BACKLOG_BYTES", 64 * 1024)
    first = guardian.pid
    assert first is not None
    os.kill(first, signal.SIGSTOP)  # it reads no more; the pipe fills, then the backlog
    children = [object() for _ in range(40_000)]  # ~2.5 MiB of lines: past pipe and backlog
    for child in children:
        guardian.child_started(child, os.getpid(), "")
    second = await replaced(guardian, first)
    assert not psutil.pid_exists(first)  # killed although stopped, and reaped
    for child in children:
        guardian.child_ended(child)
    await guardian.aclose()  # `bye` once every child ended: it exits at once, reaped here
    assert guardian.pid is None and not psutil.pid_exists(second)


async def test_a_clean_close_leaves_no_guardian(guardian: Guardian) -> None:
    pid = guardian.pid
    assert pid is not None
    child = object()
    guardian.child_started(child, os.getpid(), "")
    guardian.child_ended(child)
    await asyncio.wait_for(guardian.aclose(), WAIT_S)
    assert guardian.pid is None and not psutil.pid_exists(pid)


async def test_a_sweep_handed_over_is_told_to_the_guardian_started_in_place_of_the_first(
    guardian: Guardian, marker: str
) -> None:
    stray = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        "trap '' TERM; echo ready; exec sleep 1000",
        env={"PATH": os.environ["PATH"], RUN_MARKER: marker},
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert stray.stdout is not None
    assert await asyncio.wait_for(stray.stdout.readline(), WAIT_S) == b"ready\n"
    ticks = cgroups.start_ticks(stray.pid)
    assert ticks is not None
    kill_at = asyncio.get_running_loop().time() + 0.5
    sweep = SweepLeft(cgroups=(), pids=((stray.pid, ticks),), markers=(), kill_at=kill_at)
    assert guardian.hand_over(sweep)
    first = guardian.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)  # by pid: the guardian this test started
    await replaced(guardian, first)
    await asyncio.wait_for(guardian.aclose(), WAIT_S)  # its bye: not waited for
    # The guardian in its place was told the sweep: the grace over, SIGKILL.
    assert await asyncio.wait_for(stray.wait(), WAIT_S) == -signal.SIGKILL
    assert await poll_until(lambda: guardian.pid is None, WAIT_S)  # exited, reaped here


async def test_no_sweep_is_handed_to_a_guardian_already_said_goodbye_to(guardian: Guardian) -> None:
    await guardian.aclose()
    sweep = SweepLeft(cgroups=(), pids=(), markers=(), kill_at=0.0)
    assert not guardian.hand_over(sweep)  # the server then waits for its sweep itself
