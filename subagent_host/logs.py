"""Logging setup: stderr or `--log-file`, never stdout (stdout is the wire).

Two formats (`--log-format`): `text` for a person, and `json`, one object per line
for a machine (`JsonFormatter`). A line about a run carries its `runId`, and about a
child its `index` and `pid`: the call site passes them with `extra=`, the formatter
reads them from the record (no state of its own).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TextIO

from subagent_host.state_layout import UnsafePath

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# What `extra=` may carry to a JSON line, in the order it is written.
RUN_FIELDS: Final = ("runId", "index", "pid")
# Like the database: a log may name paths, prompts' digests and children's errors.
LOG_FILE_MODE: Final = 0o600


class JsonFormatter(logging.Formatter):
    """One JSON object per line: `time` (ISO 8601 UTC, milliseconds), `level`, `logger`,
    `message`, then `runId`, `index` and `pid` when the call passed them, and for an
    exception `exc` (its type and message, one line) and `exception` (the traceback).

    Newlines inside a value are escaped, so a record is always one line; text that is
    not valid Unicode (a child's undecodable bytes) is replaced, so every line parses.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": _valid(record.getMessage()),
        }
        for name in RUN_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            entry["exc"] = _valid(_summary(error))
            entry["exception"] = _valid(self.formatException(record.exc_info))
        if record.stack_info:
            entry["stack"] = _valid(self.formatStack(record.stack_info))
        return json.dumps(entry, ensure_ascii=False, default=str)


def _summary(error: BaseException) -> str:
    """`ValueError: the first line of its message`."""
    lines = str(error).splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _valid(text: str) -> str:
    """`text` as it can be written in UTF-8: a lone surrogate becomes U+FFFD."""
    if text.isascii():  # nearly always: no copy
        return text
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


class LogFileIsTheWire(ValueError):
    """The log file is the file stdout is open on, which carries the protocol only."""


def configure_logging(level: str, log_file: Path | None, log_format: str = "text") -> None:
    """Send every log record at `level` or above to `log_file`, or to stderr, as
    `text` or `json` lines.

    Raises OSError if the log file cannot be opened, LogFileIsTheWire if it is stdout.
    """
    handler: logging.Handler
    if log_file is not None:
        handler = logging.StreamHandler(open_log_file(log_file))
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def open_log_file(path: Path) -> TextIO:
    """Open `path` for appending, created 0600 whatever the umask.

    A file of ours that exists with wider bits is tightened to 0600 (as the
    store does with its database). Anything else is left as it is: a file of
    another user, or a FIFO, a terminal or `/dev/stderr` given as the log file.
    A symlink is followed only when it is ours or root's (as `/dev/stderr` is):
    one another user planted (in a shared directory) must not choose where we
    write; that raises UnsafePath.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW, LOG_FILE_MODE)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        owner = path.lstat().st_uid
        if owner not in (os.getuid(), 0):
            raise UnsafePath(f"{path} is a symlink of another user (uid {owner})") from None
        fd = os.open(path, flags, LOG_FILE_MODE)
    try:
        info = os.fstat(fd)
        if _is_the_wire(info):
            raise LogFileIsTheWire(
                f"--log-file {path} is the server's stdout, which carries the protocol"
                " only: log to stderr or to another file"
            )
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


def _is_the_wire(info: os.stat_result) -> bool:
    """Is `info` the file stdout is open on (by name, `/dev/stdout`, `/proc/self/fd/1`, or
    a link), while stderr is elsewhere? Lines there would reach the client as protocol.
    Where stderr goes too (a terminal, `2>&1`), logs go by default anyway."""
    return _is_open_on(info, 1) and not _is_open_on(info, 2)


def _is_open_on(info: os.stat_result, fd: int) -> bool:
    try:
        other = os.fstat(fd)
    except OSError:  # closed
        return False
    return (info.st_dev, info.st_ino) == (other.st_dev, other.st_ino)


def destination(level: int) -> tuple[int, bool] | None:
    """Where records at `level` go: the descriptor of the log's stream and whether it takes
    JSON lines, for another process of the server's to write its lines in the same log
    (the guardian); None when such records are not written, or not to a stream."""
    root = logging.getLogger()
    if not root.isEnabledFor(level):
        return None
    for handler in root.handlers:
        if isinstance(handler, logging.StreamHandler):
            try:
                fd = handler.stream.fileno()
            except (AttributeError, OSError, ValueError):
                continue
            return fd, isinstance(handler.formatter, JsonFormatter)
    return None
