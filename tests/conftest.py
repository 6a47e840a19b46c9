"""Fixtures for the whole suite."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagent_host.backends import cgroups, tracking

# pytest-xdist's workers run with COLUMNS=80 and LINES=24 in their environment, which
# every program a test starts would take for its terminal's size (a `watch` in a tmux
# window of 150 columns drew 80; the MCP Inspector's CLI printed nothing). No test runs
# in a terminal of that size: the programs under test see none but their own.
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)


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
    """After the suite, this process's own cgroups (those of the supervisors of in-process
    tests) are all gone. Each server a test starts is checked as it ends
    (tests/e2e/harness.py): instance cgroups are host-wide, and another suite's servers
    may come and go meanwhile, so the whole hierarchy is not compared."""
    hierarchy = cgroups.find_hierarchy()
    yield
    if hierarchy is None:
        return
    own = cgroups.Group(
        hierarchy.root / cgroups.instance_name(os.getpid(), cgroups.start_ticks(os.getpid()) or 0)
    )
    children = [group.name for group in own.children()]
    own.remove()
    assert children == [], f"cgroups left behind: {children}"


@pytest.fixture(autouse=True)
def not_a_subreaper_after_the_test() -> Iterator[None]:
    """In-process supervisors make this process a child subreaper; a later test's server
    that dies must not hand its orphans to us (they would stay our zombies)."""
    yield
    tracking.set_subreaper(False)


# An empty `/tmp/.git` appears when a server's SIGKILL ends interactive agent children
# mid-tool (tests/e2e/test_live_leftovers.py; seen twice before in CI runs with codex
# tests): most likely the mount point codex's Linux sandbox makes for the read-only
# `.git` it keeps under each writable root, `/tmp` among them, left when its command is
# killed. `/tmp` then looks like a git repository to every later test (isolation,
# claude's git status). Only that empty directory, made during the test, is removed.
TMP_GIT = Path("/tmp/.git")


@pytest.fixture(autouse=True)
def no_git_left_in_tmp() -> Iterator[None]:
    before = TMP_GIT.exists()
    yield
    if not before and TMP_GIT.is_dir() and not any(TMP_GIT.iterdir()):
        with contextlib.suppress(OSError):
            TMP_GIT.rmdir()
