"""Where the server `subagent-host run` starts writes its log, and when that log is shown.

The server's stderr (its log lines, and the lines of its guardian) and `run`'s own
log records go to the state directory's `server.log` (appended to, 0600), never to
`run`'s stderr: stderr holds the run's live line and `run`'s own errors only. With
`-v` (or when the server could not start: its one line says why) what was written
during this `run` is copied to stderr once the run is over; written meanwhile, it
would tear the live line apart. A state directory that cannot hold the log (not
safe to use, not writable: the server refuses the first) has it kept in a temporary
file for as long as `run` lasts.

The log is bounded: one over `ROTATE_BYTES` when a `run` starts is renamed to
`server.log.1` (replacing the one before), so about twice that is kept. Runs that
start at once rotate it once: each holds an `flock` on the file it opened while it
looks at its size and renames it, and one that finds the name moved to a new file
meanwhile opens that instead. A run's own part is read back from the file it wrote
to, wherever another run has moved it since.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final, TextIO

from subagent_host.logs import LOG_FORMAT, open_log_file
from subagent_host.state_layout import (
    SERVER_LOG,
    UnsafePath,
    private_directory,
    state_dir_problem,
)

ROTATE_BYTES: Final = 1024 * 1024
"""A log larger than this when a `run` starts is rotated: one entry per `run`, a few
lines each, make this thousands of runs, and what is kept stays small."""
ROTATED_SUFFIX: Final = ".1"
ROTATE_ATTEMPTS: Final = 4
"""Opens of the log's name, each after another run renamed the file opened before: one
rotation renames it, the next needs a new log filled past `ROTATE_BYTES` meanwhile, so
a third is all but never needed; after the last, the log is written to unrotated."""


class ServerLog:
    """The log file open for appending, the same file open for reading, and where this
    `run`'s part of it starts."""

    def __init__(self, path: Path, stream: TextIO, written: BinaryIO) -> None:
        self.path = path
        self.stream = stream
        self._written = written
        self._start = os.lseek(stream.fileno(), 0, os.SEEK_END)

    def replay(self) -> None:
        """Copy what was written to the log since it was opened here to stderr."""
        self.stream.flush()
        sys.stderr.flush()
        with contextlib.suppress(OSError):
            self._written.seek(self._start)
            shutil.copyfileobj(self._written, sys.stderr.buffer)
        sys.stderr.flush()


@contextlib.contextmanager
def server_log(state_dir: Path) -> Iterator[ServerLog]:
    """The log of the server `run` starts on `state_dir`; `run`'s own records go there too."""
    scratch: Path | None = None
    try:
        private_directory(state_dir, parents=True)  # as the server makes it
        if (problem := state_dir_problem(state_dir)) is not None:
            raise UnsafePath(problem)  # the server refuses it: nothing is written there
        path = state_dir / SERVER_LOG
        stream, written = open_bounded(path)
    except (OSError, UnsafePath):
        descriptor, name = tempfile.mkstemp(prefix="subagent-host-run-", suffix=".log")
        os.close(descriptor)
        scratch = path = Path(name)
        stream = open_log_file(path)
        written = path.open("rb")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]  # never Python's last resort, which writes to stderr
    try:
        yield ServerLog(path, stream, written)
    finally:
        root.handlers[:] = [logging.NullHandler()]
        stream.close()
        written.close()
        if scratch is not None:
            scratch.unlink(missing_ok=True)


def open_bounded(path: Path) -> tuple[TextIO, BinaryIO]:
    """The log at `path` open for appending and for reading (the same file), rotated
    first to `server.log.1` when it is over `ROTATE_BYTES`."""
    for _attempt in range(ROTATE_ATTEMPTS):
        stream = open_log_file(path)
        try:
            # Whoever holds it holds it for a stat, a rename and an open: a short wait.
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX)
            if _is_named(stream, path) and not _rotated(stream, path):
                written = path.open("rb")  # while the lock is held, nobody renames it
                fcntl.flock(stream.fileno(), fcntl.LOCK_UN)
                return stream, written
        except BaseException:
            stream.close()
            raise
        stream.close()  # rotated, here or by another run: the name is a new file now
    # Other runs rotated it under every attempt: this one writes on without rotating.
    return open_log_file(path), path.open("rb")


def _rotated(stream: TextIO, path: Path) -> bool:
    """Whether the log open in `stream` (under its lock, at `path`) was full and is now
    `server.log.1`. A rename that fails leaves it where it is, written on."""
    if os.fstat(stream.fileno()).st_size <= ROTATE_BYTES:
        return False
    try:
        os.replace(path, path.with_name(path.name + ROTATED_SUFFIX))
    except OSError:
        return False
    return True


def _is_named(stream: TextIO, path: Path) -> bool:
    """Whether `path` still names the file open in `stream` (another run may have
    renamed it between the open and the lock)."""
    try:
        named = os.stat(path)
    except OSError:
        return False
    opened = os.fstat(stream.fileno())
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
