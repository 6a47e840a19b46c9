"""Where a workflow's snapshot may be written: only a regular file, outside the system
trees and outside the server's own files (its state directory and its log file).

Asked when a workflow is planned (`planning/workflow.py`) and again, on the
writing thread, just before each rename (`handlers/snapshot_file.py`).
"""

from __future__ import annotations

import os
import stat
from typing import Final

import attrs

# The kernel's own trees: nothing there is a file a snapshot belongs in (and /dev/shm,
# though a tmpfs, is the system's shared memory).
SYSTEM_ROOTS: Final = ("/dev", "/proc", "/sys")

_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


@attrs.frozen
class ServerFiles:
    """Where the server keeps what a snapshot must never replace: the run history and
    pi's session files (everything in the state directory) and the log file."""

    state_dir: str | None = None
    log_file: str | None = None

    def refusal(self, resolved: str, path: str) -> str | None:
        """Why `resolved` (a realpath) is one of the server's own files, or None.
        Blocking (realpath): call it off the loop."""
        if self.state_dir is not None:
            home = os.path.realpath(self.state_dir)
            if resolved == home or resolved.startswith(home.rstrip("/") + "/"):
                return f"{path!r} is inside the server's state directory {self.state_dir}"
        if self.log_file is not None and resolved == os.path.realpath(self.log_file):
            return f"{path!r} is the server's log file"
        return None


NO_SERVER_FILES: Final = ServerFiles()


def refusal(path: str, server: ServerFiles = NO_SERVER_FILES) -> str | None:
    """Why the snapshot may not be written at `path` (an absolute path), or None.

    A symlink is judged by what it points to: a link to a regular file outside
    the system trees and the server's own files is fine (the link itself is what
    the rename replaces). A path that does not exist yet is fine. Blocking (stat):
    call it off the loop.
    """
    try:
        resolved = os.path.realpath(path)
    except OSError as exc:  # a link on the way whose target may not be read
        return f"{path!r} cannot be examined: {exc.strerror or exc}"
    for root in SYSTEM_ROOTS:
        if resolved == root or resolved.startswith(root + "/"):
            return f"{path!r} is under {root}"
    if (own := server.refusal(resolved, path)) is not None:
        return own
    try:
        mode = os.stat(path).st_mode  # follows a symlink to its target
    except FileNotFoundError:
        return None  # a new file (or a link to one): created by the rename
    except OSError as exc:
        return f"{path!r} cannot be examined: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"{path!r} is {kind}"
