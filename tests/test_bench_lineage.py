"""bench/lineage.py: a benchmark counts what it started, orphans included, and never
another job of its shell session."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator

import psutil
import pytest

from bench.lineage import Lineage


def orphan() -> int:
    """A `sleep` whose parent shell has exited: handed to init (or a subreaper)."""
    shell = subprocess.run(  # noqa: TID251 - a one-shot shell that leaves its child
        ["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return int(shell.stdout)


@pytest.fixture
def ended() -> Iterator[list[int]]:
    """Pids a test started; ended by pid afterwards, and proven gone."""
    pids: list[int] = []
    yield pids
    left = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            process.kill()
            left.append(process)
    _gone, alive = psutil.wait_procs(left, timeout=30)
    assert alive == []


def others() -> set[int]:
    """Descendants of this process alive before a test started any: a test runner's
    worker may still be ending what an earlier test left (another file's servers, a
    cluster's nodes), which the test's lineage counts but did not start."""
    return {process.pid for process in psutil.Process().children(recursive=True)}


def started_here(lineage: Lineage, before: set[int]) -> list[int]:
    """What the lineage counts of what the test started."""
    return [pid for pid in lineage.alive() if pid not in before]


def test_an_orphan_seen_while_it_ran_still_counts(ended: list[int]) -> None:
    before = others()
    lineage = Lineage()
    shell = subprocess.Popen(  # noqa: TID251 - a shell that waits for its line on stdin
        ["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!; read _; exit 0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert shell.stdout is not None and shell.stdin is not None
    grandchild = int(shell.stdout.readline())
    ended.append(grandchild)
    lineage.look()  # while the sleep is still the shell's
    shell.stdin.close()  # the shell exits: the sleep is handed to init
    assert shell.wait(timeout=30) == 0
    assert grandchild not in [c.pid for c in psutil.Process().children(recursive=True)]
    assert started_here(lineage, before) == [grandchild]
    process = psutil.Process(grandchild)
    process.kill()
    _gone, alive = psutil.wait_procs([process], timeout=30)  # init reaps it
    assert alive == []
    assert started_here(lineage, before) == []


def test_another_job_of_the_session_is_not_counted(ended: list[int]) -> None:
    before = others()
    other = orphan()  # started after the lineage's owner, in its session, but not by it
    ended.append(other)
    assert os.getsid(other) == os.getsid(0)
    lineage = Lineage()
    lineage.look()
    assert started_here(lineage, before) == []
    assert other not in lineage.alive()


def test_a_reused_pid_is_not_counted(ended: list[int]) -> None:
    before = others()
    lineage = Lineage()
    child = subprocess.Popen(["sleep", "60"])  # noqa: TID251 - one child to look at
    ended.append(child.pid)
    lineage.look()
    assert started_here(lineage, before) == [child.pid]
    child.kill()
    child.wait(timeout=30)
    assert started_here(lineage, before) == []
