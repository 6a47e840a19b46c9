"""The snapshot file's writer: it replaces a regular file (or a link to one) atomically
and leaves alone a path that turned into anything else since the workflow was planned."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from subagent_host.handlers.snapshot_file import replace_file
from subagent_host.planning.snapshot_path import ServerFiles
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


def test_a_path_that_now_leads_into_the_state_dir_or_to_the_log_file_is_left_alone(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    database = state / "subagent-host.sqlite3"
    database.write_bytes(b"SQLite format 3\0")
    log = tmp_path / "host.log"
    log.write_text("lines\n")
    server = ServerFiles(state_dir=str(state), log_file=str(log))
    place = tmp_path / "place"
    place.mkdir()
    assert replace_file(str(place / "snap.json"), b"new", server) is None
    place.rename(tmp_path / "was")
    place.symlink_to(state)  # the snapshot's directory swapped for the state directory
    problem = replace_file(str(place / "subagent-host.sqlite3"), b"new", server)
    assert problem == (
        f"{str(place / 'subagent-host.sqlite3')!r} is inside the server's state directory {state}"
    )
    link = tmp_path / "snap.json"
    link.symlink_to(log)
    assert replace_file(str(link), b"new", server) == f"{str(link)!r} is the server's log file"
    assert database.read_bytes() == b"SQLite format 3\0" and log.read_text() == "lines\n"
    assert sorted(os.listdir(state)) == ["subagent-host.sqlite3"]
