"""Where the server `subagent-host run` starts writes its log, and when that log is shown.

The server's stderr (its log lines, and the lines of its guardian) and `run`'s own
log records go to the state directory's `server.log` (appended to, 0600), never to
`run`'s stderr: stderr holds the run's live line and `run`'s own errors only. With
`-v` (or when the server could not start: its one line says why) what was written
during this `run` is copied to stderr once the run is over; written meanwhile, it
would tear the live line apart. A state directory that cannot hold the log (not
safe to use, not writable: the server refuses the first) has it kept in a temporary
file for as long as `run` lasts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from subagent_host.logs import LOG_FORMAT, open_log_file
from subagent_host.state_layout import (
    SERVER_LOG,
    UnsafePath,
    private_directory,
    state_dir_problem,
)


class ServerLog:
    """The log file open for appending, and where this `run`'s part of it starts."""

    def __init__(self, path: Path, stream: TextIO) -> None:
        self.path = path
        self.stream = stream
        self._start = os.lseek(stream.fileno(), 0, os.SEEK_END)

    def replay(self) -> None:
        """Copy what was written to the log since it was opened here to stderr."""
        self.stream.flush()
        sys.stderr.flush()
        with contextlib.suppress(OSError), self.path.open("rb") as written:
            written.seek(self._start)
            shutil.copyfileobj(written, sys.stderr.buffer)
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
        stream = open_log_file(path)
    except (OSError, UnsafePath):
        descriptor, name = tempfile.mkstemp(prefix="subagent-host-run-", suffix=".log")
        os.close(descriptor)
        scratch = path = Path(name)
        stream = open_log_file(path)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]  # never Python's last resort, which writes to stderr
    try:
        yield ServerLog(path, stream)
    finally:
        root.handlers[:] = [logging.NullHandler()]
        stream.close()
        if scratch is not None:
            scratch.unlink(missing_ok=True)
