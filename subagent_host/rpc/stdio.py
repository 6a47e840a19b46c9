"""Non-blocking stdin and stdout for the event loop, whatever they are.

stdin and stdout may each be a pipe, a socket, a terminal, a regular file
(`subagent-host < requests.ndjson > replies.ndjson`) or a device such as
/dev/null. asyncio's pipe transports refuse regular files and epoll refuses
devices like /dev/null, so those are read and written in a worker thread. The wire's fd is a
private duplicate of fd 1, and fd 1 itself is pointed at stderr while serving,
so a stray `print()` can never corrupt the protocol stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import stat
from collections.abc import Callable
from typing import Final, Protocol

logger = logging.getLogger(__name__)

# Small enough that replies to a pipelined burst start flowing while later
# requests are still being read (bench/ping.py: 16 KiB beat 64 and 256 KiB).
READ_CHUNK: Final = 16 * 1024
# The outgoing queue's bound: once this much output waits for a client that reads
# slowly or not at all, the server stops producing more (it stops reading stdin and
# the output of streamed children) until the queue is below the low-water mark.
OUTGOING_QUEUE_BYTES: Final = 4 * 1024 * 1024
OUTGOING_QUEUE_LOW_BYTES: Final = 1024 * 1024


class InputStream(Protocol):
    async def read(self) -> bytes:
        """Return the next bytes available, or b"" at end of input."""
        ...

    def close(self) -> None: ...


class OutputStream(Protocol):
    def write(self, data: bytes) -> None:
        """Queue bytes for the client; never blocks, keeps order."""
        ...

    async def drain(self) -> None:
        """Wait while the client is slower than we write (flow control)."""
        ...

    def watch_backlog(self, full: Callable[[], None], drained: Callable[[], None]) -> None:
        """Call `full` when more than OUTGOING_QUEUE_BYTES wait for the client, and
        `drained` once less than OUTGOING_QUEUE_LOW_BYTES do (or the client is gone)."""
        ...

    @property
    def is_broken(self) -> bool:
        """The client stopped reading (EPIPE): nothing more can be delivered."""
        ...

    async def wait_broken(self) -> None:
        """Return once the client has stopped reading."""
        ...

    async def aclose(self) -> None:
        """Hand every queued byte to the OS, then close. Callers bound the wait."""
        ...


def _is_pollable(fd: int) -> bool:
    """Can the event loop wait on `fd`? Not for regular files, nor for /dev/null and its kin.

    epoll refuses such descriptors (EPERM), and asyncio would then never report
    them ready; they are read and written in a worker thread instead, where they
    never block for long.
    """
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return False
    if not hasattr(select, "epoll"):
        return True
    with select.epoll() as probe:
        try:
            probe.register(fd, select.EPOLLIN)
        except PermissionError:
            return False
    return True


class _PipeInput:
    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport) -> None:
        self._reader = reader
        self._transport = transport

    async def read(self) -> bytes:
        return await self._reader.read(READ_CHUNK)

    def close(self) -> None:
        self._transport.close()


class _FileInput:
    """Reads a descriptor the loop cannot poll, from a worker thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def read(self) -> bytes:
        return await asyncio.to_thread(os.read, self._fd, READ_CHUNK)

    def close(self) -> None:
        pass


class _Backlog:
    """Whether the outgoing queue is full, told to whoever watches it on each change."""

    def __init__(self) -> None:
        self.writable = asyncio.Event()
        self.writable.set()
        self._watchers: list[tuple[Callable[[], None], Callable[[], None]]] = []

    def watch(self, full: Callable[[], None], drained: Callable[[], None]) -> None:
        self._watchers.append((full, drained))
        if not self.writable.is_set():
            full()

    def set_full(self, full: bool) -> None:
        if full == (not self.writable.is_set()):
            return
        if full:
            self.writable.clear()
        else:
            self.writable.set()
        for on_full, on_drained in self._watchers:
            (on_full if full else on_drained)()


class _WriteProtocol(asyncio.BaseProtocol):
    """Flow control and end-of-life for the stdout pipe transport."""

    def __init__(self) -> None:
        self.backlog = _Backlog()
        self.closed = asyncio.Event()

    def pause_writing(self) -> None:
        self.backlog.set_full(True)

    def resume_writing(self) -> None:
        self.backlog.set_full(False)

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:  # the server says at WARNING what it does about it (app.py)
            logger.info("stdout closed: %s", _describe(exc))
        self.closed.set()
        self.backlog.set_full(False)  # nothing is queued for anyone any more


def _describe(exc: BaseException) -> str:
    """`[Errno 32] Broken pipe`, or the type's name when the error says nothing more."""
    return str(exc) or type(exc).__name__


class _PipeOutput:
    def __init__(self, transport: asyncio.WriteTransport, protocol: _WriteProtocol) -> None:
        self._transport = transport
        self._protocol = protocol

    def write(self, data: bytes) -> None:
        # Not once the transport is closing: it closes itself the moment a write
        # fails (EPIPE) or the reader goes away, but tells the protocol only a turn
        # later, and every write in between would be dropped with a warning of
        # asyncio's (one per write past the fifth: one per reply of a burst).
        if not self._transport.is_closing():
            self._transport.write(data)

    async def drain(self) -> None:
        await self._protocol.backlog.writable.wait()

    def watch_backlog(self, full: Callable[[], None], drained: Callable[[], None]) -> None:
        self._protocol.backlog.watch(full, drained)

    @property
    def is_broken(self) -> bool:
        return self._protocol.closed.is_set() or self._transport.is_closing()

    async def wait_broken(self) -> None:
        await self._protocol.closed.wait()

    async def aclose(self) -> None:
        # A pipe transport flushes its buffer before it reports connection_lost.
        self._transport.close()
        await self._protocol.closed.wait()


class _FileOutput:
    """Writes to a descriptor the loop cannot poll, from a worker thread, in order."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending: list[bytes] = []
        self._queued = 0  # bytes pending or being written
        self._flusher: asyncio.Task[None] | None = None
        self._broken = asyncio.Event()
        self._backlog = _Backlog()

    def write(self, data: bytes) -> None:
        if self._broken.is_set():
            return
        self._pending.append(data)
        self._queued += len(data)
        if self._queued > OUTGOING_QUEUE_BYTES:
            self._backlog.set_full(True)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        while self._pending and not self._broken.is_set():
            chunk = b"".join(self._pending)
            self._pending.clear()
            try:
                await asyncio.to_thread(_write_all, self._fd, chunk)
            except OSError as exc:
                logger.error("cannot write to stdout: %s", exc)
                self._broken.set()
            self._queued -= len(chunk)
            if self._queued < OUTGOING_QUEUE_LOW_BYTES or self._broken.is_set():
                self._backlog.set_full(False)

    async def drain(self) -> None:
        await self._backlog.writable.wait()

    def watch_backlog(self, full: Callable[[], None], drained: Callable[[], None]) -> None:
        self._backlog.watch(full, drained)

    @property
    def is_broken(self) -> bool:
        return self._broken.is_set()

    async def wait_broken(self) -> None:
        await self._broken.wait()

    async def aclose(self) -> None:
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def open_input(fd: int) -> InputStream:
    """Wrap `fd` for reading on the running loop."""
    if not _is_pollable(fd):
        return _FileInput(fd)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_CHUNK, loop=loop)
    pipe = os.fdopen(fd, "rb", buffering=0, closefd=False)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe
    )
    return _PipeInput(reader, transport)


async def open_output(fd: int) -> OutputStream:
    """Wrap `fd` for writing on the running loop."""
    if not _is_pollable(fd):
        return _FileOutput(fd)
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0, closefd=False)
    transport, protocol = await loop.connect_write_pipe(_WriteProtocol, pipe)
    transport.set_write_buffer_limits(high=OUTGOING_QUEUE_BYTES, low=OUTGOING_QUEUE_LOW_BYTES)
    return _PipeOutput(transport, protocol)


class StdioGuard:
    """Give the wire a private stdout and restore the terminal's blocking mode on exit.

    Used by `app.serve`: while it is entered, fd 1 points at stderr and the
    protocol writes to a duplicate of the original stdout.
    """

    def __init__(self, stdin_fd: int = 0, stdout_fd: int = 1, stderr_fd: int = 2) -> None:
        self.stdin_fd = stdin_fd
        self._stdout_fd = stdout_fd
        self._stderr_fd = stderr_fd
        self.wire_out_fd = -1
        self._saved_stdout = -1
        self._blocking: dict[int, bool] = {}

    def __enter__(self) -> StdioGuard:
        self.wire_out_fd = os.dup(self._stdout_fd)
        self._saved_stdout = os.dup(self._stdout_fd)
        os.dup2(self._stderr_fd, self._stdout_fd)
        # The pipe transports make these non-blocking; a terminal shared with the
        # user's shell must not be left that way.
        for fd in (self.stdin_fd, self.wire_out_fd):
            self._blocking[fd] = os.get_blocking(fd)
        return self

    def __exit__(self, *_exc: object) -> None:
        for fd, blocking in self._blocking.items():
            with contextlib.suppress(OSError):
                os.set_blocking(fd, blocking)
        os.dup2(self._saved_stdout, self._stdout_fd)
        os.close(self._saved_stdout)
        with contextlib.suppress(OSError):
            os.close(self.wire_out_fd)
