"""The rules a state directory and what is in it must keep (protocol.md §13): another
user must not be able to choose where a server writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

import pytest

from subagent_host.state_layout import (
    DB_NAME,
    UnsafePath,
    private_directory,
    state_dir_problem,
)

NOBODY: Final = 65534

needs_root = pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_private_directory_of_ours_is_safe_and_a_missing_one_is_made_0700(
    tmp_path: Path,
) -> None:
    assert state_dir_problem(tmp_path) is None
    fresh = tmp_path / "fresh"
    assert state_dir_problem(fresh) is None  # created 0700 by whoever uses it
    private_directory(fresh)
    assert mode(fresh) == 0o700


def test_a_directory_of_ours_readable_by_others_is_used_as_it_is_never_chmoded(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)
    assert state_dir_problem(state) is None
    private_directory(state)
    assert mode(state) == 0o755


def test_a_directory_writable_by_others_is_refused_unless_it_is_sticky(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    problem = state_dir_problem(state)
    assert problem is not None and "writable by group or others (mode 777)" in problem
    with pytest.raises(UnsafePath):
        private_directory(state)
    assert mode(state) == 0o777  # refused, never repaired
    state.chmod(0o1777)  # sticky and ours: others may add, never remove or rename ours
    assert state_dir_problem(state) is None


@needs_root
def test_a_directory_of_another_user_is_refused_even_sticky(tmp_path: Path) -> None:
    state = tmp_path / "theirs"
    state.mkdir()
    state.chmod(0o1777)
    os.chown(state, NOBODY, NOBODY)
    problem = state_dir_problem(state)
    assert problem == f"{state} belongs to uid {NOBODY}, not to this server's (0)"
    assert mode(state) == 0o1777


@needs_root
@pytest.mark.parametrize("name", ["pi-sessions", "worktrees", "control"])
def test_a_directory_under_it_of_another_user_or_open_to_writes_is_refused(
    tmp_path: Path, name: str
) -> None:
    below = tmp_path / name
    below.mkdir()
    below.chmod(0o777)
    assert f"{below} is writable by group or others" in (state_dir_problem(tmp_path) or "")
    below.chmod(0o700)
    os.chown(below, NOBODY, NOBODY)
    assert f"{below} belongs to uid {NOBODY}" in (state_dir_problem(tmp_path) or "")
    below.rmdir()
    below.symlink_to(tmp_path)
    assert state_dir_problem(tmp_path) == f"{below} is a symlink"


@needs_root
@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_a_planted_database_file_or_symlink_is_refused(tmp_path: Path, suffix: str) -> None:
    tmp_path.chmod(0o1777)  # shared, sticky, ours: the case where others may plant
    planted = tmp_path / (DB_NAME + suffix)
    elsewhere = tmp_path.parent / "elsewhere"
    planted.symlink_to(elsewhere)
    os.lchown(planted, NOBODY, NOBODY)
    assert state_dir_problem(tmp_path) == f"{planted} is a symlink"
    planted.unlink()
    planted.write_bytes(b"")
    os.chown(planted, NOBODY, NOBODY)
    assert (
        state_dir_problem(tmp_path)
        == f"{planted} belongs to uid {NOBODY}, not to this server's (0)"
    )
    assert not elsewhere.exists()
