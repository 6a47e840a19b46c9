"""A client of a server's control socket (protocol.md §10.1): `Host` over a Unix socket.

Before anything is sent, the socket is checked for what the server made it: its
directory 0700 and the socket 0600, both this user's; and the process at the other
end is this user's and is the server expected (its pid, from the state directory's
record of that server). A socket that fails any of this is not trusted.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, TypeVar

from subagent_host.client.errors import CapacityExceeded, HostConnectionError
from subagent_host.client.host import Host
from subagent_host.rpc.control_socket import (
    UntrustedSocket,
    check_private,
    peer_credentials,
    reachable,
)
from subagent_host.rpc.wire import RunSnapshot

# Connecting to a Unix socket is answered at once by a server that listens; a server
# whose loop is stuck still accepts (the kernel does), so this bounds only oddities.
CONNECT_TIMEOUT_S: Final = 5.0

R = TypeVar("R")


class ControlUnreachable(Exception):
    """Nobody listens on the socket (the server is gone, or never made one)."""


class ControlBusy(Exception):
    """The server holds as many control connections as it takes; the message is its own
    (`busy: 8 control connections are open, at most 8`). Trying again later can work."""


class _Refusal:
    """Watches a control connection for the server's `-32005` line about no request:
    the answer of a server at its bound of connections, just before it closes."""

    def __init__(self) -> None:
        self.message: str | None = None

    def __call__(self, message: Any) -> None:
        if isinstance(message, dict) and message.get("id") is None:
            error = message.get("error")
            if isinstance(error, dict) and error.get("code") == CapacityExceeded.CODE:
                self.message = str(error.get("message"))


async def connect_control(path: Path, *, pid: int, on_message: _Refusal | None = None) -> Host:
    """A `Host` on the control socket at `path` of the server process `pid`.

    Raises UntrustedSocket when the directory, the socket or the peer is not what
    it must be, ControlUnreachable when nobody listens there.
    """
    uid = os.getuid()
    await asyncio.to_thread(_check_socket, path, uid)
    try:
        with reachable(path) as name:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                reader, writer = await asyncio.open_unix_connection(name)
    except (OSError, TimeoutError) as exc:
        raise ControlUnreachable(f"nobody answers on {path}: {exc}") from exc
    sock = writer.get_extra_info("socket")
    peer = peer_credentials(sock) if sock is not None else None
    if peer is None or peer != (pid, uid):
        writer.close()
        found = "cannot be identified" if peer is None else f"is pid {peer[0]} of uid {peer[1]}"
        raise UntrustedSocket(f"the process behind {path} {found}, not server pid {pid}")
    return Host.connect(reader, writer, on_message=on_message)


def _check_socket(path: Path, uid: int) -> None:
    if not os.path.lexists(path):  # e.g. a server of a release before control sockets
        raise ControlUnreachable(f"there is no {path}")
    check_private(path.parent, kind=stat.S_IFDIR, uid=uid)
    check_private(path, kind=stat.S_IFSOCK, uid=uid)


async def call_at(path: Path, *, pid: int, call: Callable[[Host], Awaitable[R]]) -> R:
    """`call(host)` on a connection to the server process `pid` listening at `path`.

    Raises what `connect_control` raises, `ControlBusy` when the server is at its bound
    of control connections, `HostError` when it refuses the request and
    `HostConnectionError` when it goes away first.
    """
    refusal = _Refusal()
    host = await connect_control(path, pid=pid, on_message=refusal)
    try:
        async with host:
            return await call(host)
    except HostConnectionError as exc:
        if refusal.message is not None:
            raise ControlBusy(refusal.message) from exc
        raise


async def stop_at(
    path: Path, *, pid: int, run_id: str, grace_ms: int | None, reason: str | None
) -> RunSnapshot:
    """Ask the server process `pid` listening at `path` to stop its run `run_id`; its
    final snapshot, once the run's processes are gone. Raises what `call_at` raises."""
    return await call_at(
        path, pid=pid, call=lambda host: host.stop(run_id=run_id, grace_ms=grace_ms, reason=reason)
    )
