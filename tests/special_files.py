"""Paths that are not regular files, made inside a test's own directory, and a name under
/dev/shm that a test may use (and cleans up): what a `snapshotPath` must never replace.

No test writes to a real system path: every node here is made in `tmp_path`, and the
/dev/shm name is unique to the test and removed afterwards, whatever was left there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import pytest

# A character device number no driver claims here (240-254 are for local use): the
# node is only ever examined, never opened.
UNCLAIMED_DEVICE: Final = os.makedev(240, 0)


def make_fifo(path: Path) -> None:
    os.mkfifo(path, 0o600)


def make_socket(path: Path) -> None:
    """A unix socket bound at `path` (bound from its directory: socket paths are short)."""
    with contextlib.chdir(path.parent), socket.socket(socket.AF_UNIX) as sock:
        sock.bind(path.name)


def make_directory(path: Path) -> None:
    path.mkdir()


def make_char_device(path: Path) -> None:
    """A character device node; the test is skipped where mknod is not permitted."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, UNCLAIMED_DEVICE)
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES):
            pytest.skip(f"mknod is not permitted here: {exc}")
        raise


def make_symlink_to_fifo(path: Path) -> None:
    fifo = path.with_name(path.name + ".fifo")
    make_fifo(fifo)
    path.symlink_to(fifo)


# Each shape, by name, and the kind the refusal names.
NOT_REGULAR: Final[dict[str, tuple[Callable[[Path], None], str]]] = {
    "fifo": (make_fifo, "a FIFO"),
    "socket": (make_socket, "a socket"),
    "directory": (make_directory, "a directory"),
    "char-device": (make_char_device, "a character device"),
    "symlink-to-fifo": (make_symlink_to_fifo, "a FIFO"),
}


@contextlib.contextmanager
def shm_path() -> Iterator[Path]:
    """A name under /dev/shm no one else uses; whatever was written there (the file, or
    a temporary file beside it) is removed afterwards."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm here")
    name = f"subagent-host-test-{uuid.uuid4().hex}.json"
    try:
        yield shm / name
    finally:
        for left in shm.glob(f"*{name}*"):
            left.unlink()
