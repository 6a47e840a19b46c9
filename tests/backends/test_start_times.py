"""A process's start time, read from /proc as psutil reads it, without importing psutil."""

from __future__ import annotations

import asyncio
import os
import sys

import psutil

from subagent_host.backends.cgroups import boot_time
from subagent_host.backends.liveness import START_TOLERANCE_S, process_create_time, process_is_alive


def test_the_boot_time_is_the_one_psutil_reports() -> None:
    assert boot_time() == psutil.boot_time()


def test_a_start_time_is_psutils_to_the_clock_tick() -> None:
    assert abs(process_create_time(os.getpid()) - psutil.Process().create_time()) < 0.001
    assert abs(process_create_time(1) - psutil.Process(1).create_time()) < START_TOLERANCE_S


async def test_a_recorded_process_is_alive_until_it_is_reaped_and_then_never_again() -> None:
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    created = process_create_time(child.pid)
    assert process_is_alive(child.pid, created)
    assert not process_is_alive(child.pid, created - 1.0)  # another process, same pid
    await asyncio.wait_for(child.wait(), 10)
    assert process_create_time(child.pid) == 0.0
    assert not process_is_alive(child.pid, created)
