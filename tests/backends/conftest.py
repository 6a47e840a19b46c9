from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Callable, Iterator

import psutil
import pytest

from subagent_host.backends.supervisor import RUN_MARKER


def processes_with_marker(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and process.environ().get(RUN_MARKER) == marker:
                found.append(process)
        except psutil.Error:
            continue
    return found


POLL_S = 0.01


async def poll_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Wait (bounded) until `condition()` holds, for what no event of ours reports:
    another process's exec, init reaping an orphan. False if it never held."""
    try:
        async with asyncio.timeout(timeout_s):
            while not condition():  # noqa: ASYNC110 - nothing to await: not our processes
                await asyncio.sleep(POLL_S)
    except TimeoutError:
        return False
    return True


async def assert_gone(pids: list[int], timeout_s: float = 10.0) -> None:
    """Each process has exited and been reaped (no zombie); kill it and fail otherwise.

    A process reparented to init is reaped by init a moment after it exits.
    """
    await poll_until(lambda: not any(psutil.pid_exists(pid) for pid in pids), timeout_s)
    left = [pid for pid in pids if psutil.pid_exists(pid)]
    for pid in left:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()  # by pid: what the test reported starting
    assert left == [], f"processes left behind: {left}"


@pytest.fixture
def marker() -> Iterator[str]:
    """A run marker unique to this test; fails the test if any process carrying it survives."""
    value = f"test-{uuid.uuid4().hex}"
    yield value
    left = [p for p in processes_with_marker(value) if p.status() != psutil.STATUS_ZOMBIE]
    for process in left:  # by pid, only what this test started
        process.kill()
    assert left == [], f"processes left behind: {[p.pid for p in left]}"
