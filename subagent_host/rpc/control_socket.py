"""Where a control socket is and whether to trust it (protocol.md §10.1).

Shared by the server's listener (`rpc/control.py`) and the client that reaches it
(`client/control.py`): the path of an instance's socket, the peer's pid and uid,
and the check that a directory or socket is this user's alone. Plain stdlib, so a
client loads none of the server's dispatch to reach a server.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from subagent_host.state_layout import CONTROL_DIR as CONTROL_DIR

SOCKET_SUFFIX: Final = ".sock"
# sun_path holds 108 bytes on Linux; a longer path is reached through the directory's
# descriptor (/proc/self/fd/N/name), which the kernel resolves like the path itself.
MAX_SOCKET_PATH: Final = 100
_UCRED: Final = "3i"  # struct ucred: pid, uid, gid


class UntrustedSocket(Exception):
    """A control directory or socket that is not this user's alone: never used."""


def socket_path(state_dir: Path, instance_id: str) -> Path:
    """Where the server instance `instance_id` listens."""
    return state_dir / CONTROL_DIR / f"{instance_id}{SOCKET_SUFFIX}"


def peer_credentials(sock: socket.socket) -> tuple[int, int] | None:
    """The peer's pid and uid (`SO_PEERCRED`), or None where they cannot be had."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        pid, uid, _gid = struct.unpack(
            _UCRED, sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize(_UCRED))
        )
    except OSError:
        return None
    return pid, uid


def check_private(path: Path, *, kind: int, uid: int) -> None:
    """Raise UntrustedSocket unless `path` is of `kind` (stat.S_IFDIR / S_IFSOCK), owned by
    `uid` and closed to group and others. Symlinks are not followed: one is refused."""
    try:
        found = path.lstat()
    except OSError as exc:
        raise UntrustedSocket(f"{path}: {exc.strerror or exc}") from exc
    if stat.S_IFMT(found.st_mode) != kind:
        raise UntrustedSocket(
            f"{path} is not a {'directory' if kind == stat.S_IFDIR else 'socket'}"
        )
    if found.st_uid != uid:
        raise UntrustedSocket(f"{path} belongs to uid {found.st_uid}, not to us ({uid})")
    if found.st_mode & 0o077:
        raise UntrustedSocket(f"{path} is open to others (mode {stat.S_IMODE(found.st_mode):o})")


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A name for `path` short enough for sun_path: the path itself, or the directory's
    descriptor's /proc name while the block runs."""
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)
