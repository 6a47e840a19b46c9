"""A server's control socket: the same protocol, for a local operator (protocol.md §10.1).

Beside its stdio client, a server with a state directory on disk listens on a Unix
socket in it, `<state>/control/<instance id>.sock` (directory 0700, socket 0600), so
that another process of the same user (`subagent-host stop`) can reach the runs this
server owns. Each connection speaks NDJSON JSON-RPC through the same dispatch as stdio
(`HostProtocol`, `Connection`), with a smaller method table that `app.py` supplies.

Only the same user may connect: the socket's mode says so, and each peer's uid is
checked with `SO_PEERCRED` before a byte is read (a peer that cannot be identified is
refused too). Connections are bounded in number, and one that stays silent is closed
once its requests are answered; a malformed message is answered like on stdio and
never ends the server. Nothing here blocks the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Final

import attrs

from subagent_host.errors import CapacityExceeded
from subagent_host.rpc.connection import Connection
from subagent_host.rpc.control_socket import (
    SOCKET_SUFFIX,
    check_private,
    peer_credentials,
    reachable,
)
from subagent_host.rpc.dispatch import Method, make_protocol
from subagent_host.rpc.errors import error_for_exception
from subagent_host.rpc.framing import AutoDecoder
from subagent_host.rpc.json_codec import encode_json
from subagent_host.rpc.wire import make_converter
from subagent_host.state_layout import private_directory
from subagent_host.values import Framing
from subagent_host.values.error_data import ConnectionsFull

logger = logging.getLogger(__name__)

# A handful of operators at once is plenty; more are refused so a local loop of connects
# cannot take the server's memory or descriptors.
MAX_CONNECTIONS: Final = 8
# A refused connection is told why (one -32005 line, `id: null`) and what it sent
# meanwhile is read for at most this long, so that closing it does not reset it before
# the client reads the answer. At most MAX_REFUSING are being told at once; beyond
# that, one is closed unanswered (a connect loop holds nothing for long either way).
REFUSE_LINGER_S: Final = 2.0
MAX_REFUSING: Final = 8
# A connection that sends nothing for this long is read no further (its requests are
# still answered): an idle client cannot hold one of the few slots for ever.
IDLE_S: Final = 30.0
READ_CHUNK: Final = 16 * 1024
# Once the server stops, control requests still waiting get this long to be answered
# (their runs are being stopped by the shutdown anyway).
CLOSE_TIMEOUT_S: Final = 10.0
# A socket younger than this when the sweep starts is never swept: it may be a server's
# that registered after the sweep read which servers live (file times lag time.time()
# by up to a clock tick; a second covers it many times over).
SWEEP_MARGIN_S: Final = 1.0

TableFactory = Callable[[], Mapping[str, Method]]


def remove_stale(directory: Path, live: set[str], made_before: float) -> int:
    """Delete the sockets of server instances not in `live` (they died without removing
    theirs) made before `made_before` (a time.time()); the number removed. Run off the
    loop: it touches the disk."""
    removed = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in directory.iterdir():
            if entry.suffix != SOCKET_SUFFIX or entry.stem in live:
                continue
            with contextlib.suppress(FileNotFoundError):
                found = entry.lstat()
                if stat.S_ISSOCK(found.st_mode) and found.st_mtime < made_before:
                    entry.unlink()
                    removed += 1
    return removed


@attrs.define(eq=False)
class ControlListener:
    """Listen on one control socket and serve each accepted connection.

    `app.py` starts it once the server is registered (`start`), stops accepting once
    the client is gone (`stop_accepting`, which removes the socket), and waits for what
    is still being answered before it exits (`aclose`).
    """

    path: Path
    _table: TableFactory
    _max_message_bytes: int
    _uid: int = attrs.field(kw_only=True, factory=os.getuid)
    """The only user allowed to connect (a test may name another to see a refusal)."""
    _server: asyncio.AbstractServer | None = attrs.field(init=False, default=None)
    _connections: dict[asyncio.Task[None], asyncio.StreamReader] = attrs.field(
        init=False, factory=dict
    )
    _refusing: set[asyncio.Task[None]] = attrs.field(init=False, factory=set)
    _sweeping: asyncio.Task[None] | None = attrs.field(init=False, default=None)

    async def start(self, live: Callable[[], Awaitable[set[str]]] | None = None) -> None:
        """Make the directory (0700, ours) and listen; raise OSError or UntrustedSocket
        when that cannot be done safely (the server then runs without a control socket).

        With `live` (the instance ids whose server runs), the sockets other instances
        left behind are removed in the background: the first reply waits for none of it.
        """
        directory = self.path.parent
        private_directory(directory)
        check_private(directory, kind=stat.S_IFDIR, uid=os.getuid())
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # ours by name (the instance id is new): never a live one
        with reachable(self.path) as name:
            # The directory is 0700: nobody else can reach the socket before the chmod.
            self._server = await asyncio.start_unix_server(
                self._accept, path=name, limit=self._max_message_bytes
            )
            os.chmod(name, 0o600)
        logger.debug("control socket listening at %s", self.path)
        if live is not None:
            self._sweeping = asyncio.create_task(self._sweep(live))

    async def _sweep(self, live: Callable[[], Awaitable[set[str]]]) -> None:
        # A server that registers after `live` was read binds its socket after that too:
        # only sockets older than the read (with a margin for the file system's coarser
        # clock) can be of instances `live` would have named.
        made_before = time.time() - SWEEP_MARGIN_S
        keep = await live() | {self.path.stem}
        removed = await asyncio.to_thread(remove_stale, self.path.parent, keep, made_before)
        if removed:
            logger.info("removed %d control sockets of servers that are gone", removed)

    def stop_accepting(self) -> None:
        """Accept no more connections and remove the socket."""
        if self._server is not None:
            self._server.close()
            self._server = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    async def aclose(self) -> None:
        """Stop accepting and reading; give requests still being answered CLOSE_TIMEOUT_S,
        then end their connections."""
        self.stop_accepting()
        if self._sweeping is not None:
            await asyncio.gather(self._sweeping, return_exceptions=True)
        await asyncio.gather(*self._refusing, return_exceptions=True)  # bounded: LINGER
        if not self._connections:
            return
        for reader in self._connections.values():
            reader.feed_eof()  # read no further: a client that idles does not hold us
        _done, pending = await asyncio.wait(self._connections, timeout=CLOSE_TIMEOUT_S)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        peer = peer_credentials(sock) if sock is not None else None
        if peer is None or peer[1] != self._uid:
            logger.warning(
                "control socket: refused a peer %s (only uid %d may connect)",
                "that cannot be identified" if peer is None else f"of uid {peer[1]}",
                self._uid,
            )
            writer.close()
            return
        if len(self._connections) >= MAX_CONNECTIONS:
            logger.warning("control socket: %d connections already; refusing one", MAX_CONNECTIONS)
            if len(self._refusing) >= MAX_REFUSING:
                writer.close()
                return
            refusing = asyncio.create_task(_refuse_busy(reader, writer, len(self._connections)))
            self._refusing.add(refusing)
            refusing.add_done_callback(self._refusing.discard)
            return
        task = asyncio.create_task(self._serve(reader, writer))
        self._connections[task] = reader
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._connections.pop(task, None)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one connection's requests until it ends (or idles), then close it."""
        protocol = make_protocol()
        output = _SocketOutput(writer)
        connection = Connection(
            protocol, AutoDecoder(self._max_message_bytes, Framing.NDJSON), output
        )
        protocol.attach(self._table(), connection.emit)
        try:
            await connection.read_until_eof(_SocketInput(reader))
            await protocol.wait_answered()
        except asyncio.CancelledError:
            protocol.cancel_in_flight()
            raise
        except (ConnectionError, OSError) as exc:
            logger.debug("control connection ended: %s", exc)
        finally:
            connection.flush()
            with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                await asyncio.wait_for(output.aclose(), CLOSE_TIMEOUT_S)


def busy_error(open_now: int) -> dict[str, object]:
    """The answer (`id: null`) to a connection beyond MAX_CONNECTIONS (protocol.md §10.1)."""
    busy = CapacityExceeded(
        f"busy: {open_now} control connections are open, at most {MAX_CONNECTIONS}",
        data=ConnectionsFull(open_now, MAX_CONNECTIONS),
    )
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": make_converter().unstructure(error_for_exception(busy)),
    }


async def _refuse_busy(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, open_now: int
) -> None:
    """Tell a connection beyond the bound why it is refused, then close it.

    Our side is shut for writing after the line and what the client sends is read and
    dropped until it closes (at most REFUSE_LINGER_S): a socket closed with unread bytes
    would be reset, and the client could lose the line before reading it.
    """
    try:
        writer.write(encode_json(busy_error(open_now)) + b"\n")
        writer.write_eof()
        async with asyncio.timeout(REFUSE_LINGER_S):
            await writer.drain()
            while await reader.read(READ_CHUNK):
                pass
    except (ConnectionError, OSError, TimeoutError) as exc:
        logger.debug("a refused control connection ended: %s", exc)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError, TimeoutError):
            await asyncio.wait_for(writer.wait_closed(), REFUSE_LINGER_S)


class _SocketInput:
    """A connection's bytes; end of input after IDLE_S of silence."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def read(self) -> bytes:
        try:
            async with asyncio.timeout(IDLE_S):
                return await self._reader.read(READ_CHUNK)
        except TimeoutError:
            return b""

    def close(self) -> None:
        pass


class _SocketOutput:
    """A connection's replies (rpc/stdio.py's OutputStream over a stream writer)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._closed = asyncio.Event()

    def write(self, data: bytes) -> None:
        if not self._writer.is_closing():
            self._writer.write(data)

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except ConnectionError:
            self._closed.set()

    def watch_backlog(self, full: Callable[[], None], drained: Callable[[], None]) -> None:
        """A control connection holds no streamed output back: nothing to watch."""

    @property
    def is_broken(self) -> bool:
        return self._closed.is_set() or self._writer.is_closing()

    async def wait_broken(self) -> None:
        await self._closed.wait()

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()
        self._closed.set()
