"""Can a launch start at all? Find the program a child would execute, as exec would.

A bare name is looked up on the child's PATH (the spawn's `env` PATH when it
gives one, else the server's); a name with a slash is taken relative to the
child's working directory. Only files this user may execute count.
"""

from __future__ import annotations

import os
import shutil


def find_executable(program: str, cwd: str, path: str | None) -> str | None:
    """The file that exec would run for `program`, or None."""
    if "/" in program:
        candidate = os.path.join(cwd, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.realpath(candidate)
        return None
    return shutil.which(program, path=path if path is not None else os.environ.get("PATH", ""))
