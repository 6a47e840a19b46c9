"""Logging setup: stderr or `--log-file`, never stdout (stdout is the wire)."""

from __future__ import annotations

import logging
import os
import stat
import sys
from pathlib import Path
from typing import Final, TextIO

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Like the database: a log may name paths, prompts' digests and children's errors.
LOG_FILE_MODE: Final = 0o600


def configure_logging(level: str, log_file: Path | None) -> None:
    """Send every log record at `level` or above to `log_file`, or to stderr.

    Raises OSError if the log file cannot be opened.
    """
    handler: logging.Handler
    if log_file is not None:
        handler = logging.StreamHandler(open_log_file(log_file))
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # pygls logs again what we already answered and logged; keep its detail for debugging.
    if level != "DEBUG":
        logging.getLogger("pygls").setLevel(max(logging.getLevelName(level), logging.ERROR))


def open_log_file(path: Path) -> TextIO:
    """Open `path` for appending, created 0600 whatever the umask.

    A file of ours that exists with wider bits is tightened to 0600 (as the
    store does with its database). Anything else is left as it is: a file of
    another user, or a FIFO, a terminal or `/dev/stderr` given as the log file.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, LOG_FILE_MODE)
    try:
        info = os.fstat(fd)
        if (
            stat.S_ISREG(info.st_mode)
            and info.st_uid == os.getuid()
            and stat.S_IMODE(info.st_mode) != LOG_FILE_MODE
        ):
            os.fchmod(fd, LOG_FILE_MODE)
        return open(fd, "a", encoding="utf-8")  # the handler keeps it open
    except BaseException:
        os.close(fd)
        raise
