"""Whose instance cgroup is gone: told by the lock its live server holds (cgroups.py).

Real cgroups on this host's writable cgroup v2 hierarchy (skipped without one);
each test makes instance cgroups under pids and start times no server has.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagent_host.backends import cgroups
from subagent_host.backends.cgroups import Hierarchy


@pytest.fixture
def hierarchy() -> Iterator[Hierarchy]:
    found = cgroups.find_hierarchy()
    if found is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    yield found


def held_elsewhere(path: Path) -> int:
    """Another open file holding the directory's lock, as a live server's does."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def gone_names(hierarchy: Hierarchy) -> set[str]:
    gone = hierarchy.gone_instances()
    for instance in gone:
        instance.release()
    return {instance.group.name for instance in gone}


def test_a_locked_instance_is_alive_whatever_its_pid_and_an_unlocked_one_is_gone(
    hierarchy: Hierarchy,
) -> None:
    locked = hierarchy.root / cgroups.instance_name(os.getpid(), 3)
    unlocked = hierarchy.root / cgroups.instance_name(os.getpid(), 4)
    for path in (locked, unlocked):
        path.mkdir()
    lock = held_elsewhere(locked)
    try:
        gone = gone_names(hierarchy)
        assert unlocked.name in gone
        assert locked.name not in gone
    finally:
        os.close(lock)
        locked.rmdir()
        unlocked.rmdir()


def test_an_unlocked_instance_whose_server_lives_here_is_not_gone(hierarchy: Hierarchy) -> None:
    """A server of this PID namespace between making its instance and locking it."""
    ticks = cgroups.start_ticks(os.getpid())
    assert ticks is not None
    path = hierarchy.root / cgroups.instance_name(os.getpid(), ticks)
    made = not path.exists()  # this process's own supervisors may hold it already
    path.mkdir(exist_ok=True)
    try:
        assert path.name not in gone_names(hierarchy)
    finally:
        if made:
            path.rmdir()


def test_an_instance_whose_lock_another_holds_is_not_taken(hierarchy: Hierarchy) -> None:
    path = hierarchy.root / cgroups.instance_name(os.getpid(), 5)
    path.mkdir()
    lock = held_elsewhere(path)
    try:
        with pytest.raises(OSError, match="cannot lock"):
            hierarchy.instance(os.getpid(), 5)
    finally:
        os.close(lock)
    instance = hierarchy.instance(os.getpid(), 5)  # released: taken, and kept
    assert path.name not in gone_names(hierarchy)
    assert instance.remove()
    # Made anew after its removal: a new directory, locked anew.
    instance = hierarchy.instance(os.getpid(), 5)
    assert path.name not in gone_names(hierarchy)
    assert instance.remove()
