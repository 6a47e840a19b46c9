"""Where a workflow's snapshot may be written: only a regular file, outside the system trees.

Asked when a workflow is planned (`planning/workflow.py`) and again, on the
writing thread, just before each rename (`handlers/snapshot_file.py`).
"""

from __future__ import annotations

import os
import stat
from typing import Final

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


def refusal(path: str) -> str | None:
    """Why the snapshot may not be written at `path` (an absolute path), or None.

    A symlink is judged by what it points to: a link to a regular file outside
    the system trees is fine (the link itself is what the rename replaces). A
    path that does not exist yet is fine. Blocking (stat): call it off the loop.
    """
    resolved = os.path.realpath(path)
    for root in SYSTEM_ROOTS:
        if resolved == root or resolved.startswith(root + "/"):
            return f"{path!r} is under {root}"
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
