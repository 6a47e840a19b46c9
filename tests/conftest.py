"""Fixtures for the whole suite."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagent_host.backends import cgroups, tracking


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every server a test starts without `--state-dir` keeps its history in the test's
    own directory (platformdirs reads XDG_STATE_HOME), never in the user's."""
    state_home = tmp_path / "xdg-state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state_home))
    return state_home / "subagent-host"


@pytest.fixture(autouse=True)
def private_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every server a test starts reads its configuration files and agent definitions
    from the test's own directory (XDG_CONFIG_HOME), never from the user's."""
    config_home = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    return config_home / "subagent-host"


@pytest.fixture(scope="session", autouse=True)
def no_cgroup_left_behind() -> Iterator[None]:
    """After the suite, no cgroup made by it is left: not this process's own (the supervisors
    of in-process tests), nor any server's (each removes its own at exit; a SIGKILLed
    one's is swept by the next server).

    Instance cgroups are host-wide: while servers of another test run or session live on
    this host, which new leftover is ours cannot be told, and only this process's own is
    checked.
    """
    hierarchy = cgroups.find_hierarchy()
    if hierarchy is None:
        yield
        return
    before = set(_instance_dirs(hierarchy.root))
    others_running = any(not _is_gone(name) for name in before)
    yield
    own = cgroups.Group(hierarchy.root / f"i{os.getpid()}-{cgroups.start_ticks(os.getpid())}")
    children = [group.name for group in own.children()]
    own.remove()
    left = set() if others_running else set(_instance_dirs(hierarchy.root)) - before
    assert children == [] and left == set(), f"cgroups left behind: {children} {sorted(left)}"


def _is_gone(instance: str) -> bool:
    found = cgroups.INSTANCE_PATTERN.fullmatch(instance)
    if found is None:
        return True
    pid, ticks = int(found.group(1)), int(found.group(2))
    return cgroups.start_ticks(pid) != ticks


def _instance_dirs(root: Path) -> list[str]:
    return [entry.name for entry in os.scandir(root) if entry.is_dir(follow_symlinks=False)]


@pytest.fixture(autouse=True)
def not_a_subreaper_after_the_test() -> Iterator[None]:
    """In-process supervisors make this process a child subreaper; a later test's server
    that dies must not hand its orphans to us (they would stay our zombies)."""
    yield
    tracking.set_subreaper(False)
