"""The lookup done before a program is started through the cgroup trampoline: exec's own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagent_host.backends.programs import check_executable


def executable(path: Path, mode: int = 0o755) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(mode)
    return path


def test_a_program_on_the_childs_path_is_found(tmp_path: Path) -> None:
    executable(tmp_path / "tool")
    check_executable("tool", "/", f"/nonexistent:{tmp_path}")


def test_a_missing_program_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        check_executable("no-such-tool", "/", str(tmp_path))


def test_a_program_found_only_without_execute_permission_is_permission_denied(
    tmp_path: Path,
) -> None:
    executable(tmp_path / "tool", mode=0o644)
    if os.geteuid() == 0:
        # root may read anything, but exec still wants an execute bit somewhere
        assert not os.access(tmp_path / "tool", os.X_OK)
    with pytest.raises(PermissionError):
        check_executable("tool", "/", str(tmp_path))


def test_a_later_executable_wins_over_an_earlier_one_without_permission(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    executable(tmp_path / "a" / "tool", mode=0o644)
    executable(tmp_path / "b" / "tool")
    check_executable("tool", "/", f"{tmp_path / 'a'}:{tmp_path / 'b'}")


def test_a_path_with_a_slash_is_relative_to_the_childs_working_directory(tmp_path: Path) -> None:
    executable(tmp_path / "run.sh")
    check_executable("./run.sh", str(tmp_path), "")
    with pytest.raises(FileNotFoundError):
        check_executable("./run.sh", "/", "")


def test_a_directory_is_not_executable(tmp_path: Path) -> None:
    with pytest.raises(PermissionError):
        check_executable(str(tmp_path), "/", "")
