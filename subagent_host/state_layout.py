"""What the state directory holds, and when it is safe to use (protocol.md §13).

A server writes its run history, pi's session files, its children's worktrees and
its control socket there, so whoever else can add or replace entries there could
choose where the server writes (a planted `subagent-host.sqlite3 → elsewhere`
symlink) or what it reads. The rules, for the state directory and every directory
under it the server uses:

- a directory is safe when it is a real directory (not a symlink), owned by the
  server's uid, and not writable by group or others, unless it is sticky: in a
  sticky directory of ours others may add entries but never remove or rename ours
  (root's `/tmp`, for a server run as root);
- an entry the server opens there (the database and its `-wal`, `-shm` and
  `-journal` files) is a regular file of the server's uid, never a symlink;
- a directory the server creates is created 0700; one that exists is used as it
  is, never chmod'ed.

Plain stdlib and nothing of ours: the command line checks a state directory with
it before anything is served, the doctor reports what it finds, the store, the
app, the worktrees and the control socket make their directories through it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

DB_NAME: Final = "subagent-host.sqlite3"
# SQLite's companions of the database, opened by name beside it.
DB_COMPANIONS: Final = ("-wal", "-shm", "-journal")
PI_SESSIONS_DIR: Final = "pi-sessions"
WORKTREES_DIR: Final = "worktrees"
CONTROL_DIR: Final = "control"
# The log of the servers `subagent-host run` starts (their stderr), appended to.
SERVER_LOG: Final = "server.log"
SUBDIRECTORIES: Final = (PI_SESSIONS_DIR, WORKTREES_DIR, CONTROL_DIR)
PRIVATE_MODE: Final = 0o700


class UnsafePath(PermissionError):
    """A directory or file in the state directory that others could choose for us."""


def directory_problem(path: Path, uid: int | None = None) -> str | None:
    """Why the existing directory `path` is not safe to use (see above), or None; also
    None when nothing is there (whoever creates it makes it 0700). Never follows a
    symlink at `path` itself."""
    found = _own_entry(path, os.getuid() if uid is None else uid, stat.S_ISDIR, "a directory")
    if found is None or isinstance(found, str):
        return found
    mode = stat.S_IMODE(found.st_mode)
    if mode & 0o022 and not mode & stat.S_ISVTX:
        return f"{path} is writable by group or others (mode {mode:o}) and not sticky"
    return None


def file_problem(path: Path, uid: int | None = None) -> str | None:
    """Why the existing entry `path` is not a file this server may open, or None (also
    when nothing is there)."""
    found = _own_entry(path, os.getuid() if uid is None else uid, stat.S_ISREG, "a regular file")
    return found if isinstance(found, str) else None


def _own_entry(
    path: Path, uid: int, is_kind: Callable[[int], bool], kind: str
) -> os.stat_result | str | None:
    """What is at `path` (never following a symlink there) when it is `kind` and `uid`'s;
    else why not; None when nothing is there (none of ours either)."""
    try:
        found = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"{path} cannot be examined: {exc.strerror or exc}"
    if stat.S_ISLNK(found.st_mode):
        return f"{path} is a symlink"
    if not is_kind(found.st_mode):
        return f"{path} is not {kind}"
    if found.st_uid != uid:
        return f"{path} belongs to uid {found.st_uid}, not to this server's ({uid})"
    return found


def database_problem(state_dir: Path, uid: int | None = None) -> str | None:
    """Why the database's files in `state_dir` may not be opened, or None."""
    names = (DB_NAME, *(DB_NAME + suffix for suffix in DB_COMPANIONS))
    return next(
        (problem for name in names if (problem := file_problem(state_dir / name, uid))), None
    )


def state_dir_problem(state_dir: Path, uid: int | None = None) -> str | None:
    """Why a server may not use `state_dir` (the directory, the directories under it
    that it uses, the database's files), or None. Blocking (lstat)."""
    if (problem := directory_problem(state_dir, uid)) is not None:
        return problem
    for name in SUBDIRECTORIES:
        if (problem := directory_problem(state_dir / name, uid)) is not None:
            return problem
    return database_problem(state_dir, uid)


def private_directory(path: Path, *, parents: bool = False) -> None:
    """Make `path` a directory (0700) unless it is one; raise UnsafePath when what is
    there is not safe to use (it is never chmod'ed), OSError when it cannot be made."""
    try:
        path.mkdir(mode=PRIVATE_MODE, parents=parents)
    except FileExistsError:
        pass
    if (problem := directory_problem(path)) is not None:
        raise UnsafePath(problem)
