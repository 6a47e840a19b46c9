"""Would `exec` find and run this program? Asked before starting it through a trampoline.

A child placed in its cgroup is started as `sh -c '... exec "$@"'` (cgroups.py):
the shell, not Popen, then execs the program, and a program that is missing or
not executable would show up as the shell's exit status 127 or 126 instead of
the start failure a client is told about (`spawn-failed`). So the same lookup
exec does — the argument as a path when it holds a slash (relative to the
child's working directory), else each directory of the child's PATH in turn — is
done here first, and fails the same way: FileNotFoundError or PermissionError.
"""

from __future__ import annotations

import errno
import os
import stat

# What Popen searches when the child's environment has no PATH (execvpe's default).
DEFAULT_PATH = os.defpath


def check_executable(program: str, cwd: str, path: str | None) -> None:
    """Raise OSError as exec would if `program` cannot be run from `cwd` with `path`."""
    if not program:
        raise FileNotFoundError(errno.ENOENT, "empty program name", program)
    if "/" in program:
        _check_file(os.path.join(cwd, program), program)
        return
    denied: OSError | None = None
    for directory in (path if path is not None else DEFAULT_PATH).split(os.pathsep):
        candidate = os.path.join(cwd, directory or ".", program)
        try:
            _check_file(candidate, program)
        except PermissionError as exc:
            denied = denied or exc  # exec goes on searching, and reports EACCES at the end
        except OSError:
            continue
        else:
            return
    if denied is not None:
        raise denied
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def _check_file(candidate: str, program: str) -> None:
    info = os.stat(candidate)  # FileNotFoundError / NotADirectoryError as exec's ENOENT
    if not stat.S_ISREG(info.st_mode) or not os.access(candidate, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
