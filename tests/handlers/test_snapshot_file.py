"""The snapshot file's writer: it replaces a regular file (or a link to one) atomically
and leaves alone a path that turned into anything else since the workflow was planned."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from subagent_host.handlers.snapshot_file import replace_file
from tests.special_files import NOT_REGULAR, shm_path


def test_a_regular_file_is_replaced_whole_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_text("old")
    path.chmod(0o644)
    assert replace_file(str(path), b"new") is None
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["snap.json"]


def test_a_symlink_to_a_regular_file_is_itself_replaced_and_its_target_kept(
    tmp_path: Path,
) -> None:
    target = tmp_path / "target.json"
    target.write_text("kept")
    path = tmp_path / "snap.json"
    path.symlink_to(target)
    assert replace_file(str(path), b"new") is None
    assert not path.is_symlink() and path.read_bytes() == b"new"
    assert target.read_text() == "kept"


@pytest.mark.parametrize("shape", sorted(NOT_REGULAR))
def test_a_path_that_became_no_regular_file_is_left_alone(tmp_path: Path, shape: str) -> None:
    make, kind = NOT_REGULAR[shape]
    path = tmp_path / "snap.json"
    make(path)
    before = sorted(os.listdir(tmp_path))
    mode = path.lstat().st_mode
    assert replace_file(str(path), b"new") == f"{str(path)!r} is {kind}"
    assert path.lstat().st_mode == mode
    assert sorted(os.listdir(tmp_path)) == before  # no temporary file left either


def test_a_path_under_dev_is_never_written(tmp_path: Path) -> None:
    with shm_path() as shm:
        link = tmp_path / "snap.json"
        link.symlink_to(shm)
        assert replace_file(str(link), b"new") == f"{str(link)!r} is under /dev"
        assert link.is_symlink() and not shm.exists()
