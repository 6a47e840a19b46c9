"""A child's pipes, driven straight from the event loop's selector.

asyncio's subprocess layer wraps each pipe in a transport, a protocol and a
stream, and watches every child from a thread of its own. A supervised child
needs much less: its output handed to a sink as it is read, its stdin written
once and closed. Doing that with `add_reader`/`add_writer` on non-blocking
descriptors costs one callback per read and no thread, which is what keeps
starting a short child cheap and draining a chatty one close to `cat`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import Callable
from typing import Final

# At most this much per read. Larger reads were measured slower, not faster:
# a 1 MiB buffer per read is mapped fresh and faulted in each time, and draining
# 200 MiB took twice as long as with 256 KiB (bench/runs.py, output drain).
READ_CHUNK: Final = 256 * 1024
# Pipe capacity for a child's stdout and stderr (the default is 64 KiB).
OUTPUT_PIPE_BYTES: Final = 1024 * 1024


def enlarge(fd: int) -> None:
    """Grow the pipe `fd` to OUTPUT_PIPE_BYTES, so a chatty child gets further ahead of
    us (Linux pipes only)."""
    if hasattr(fcntl, "F_SETPIPE_SZ"):
        # Over the pipe-max-size limit: keep the default size.
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, OUTPUT_PIPE_BYTES)


class OutputPipe:
    """Reads one output pipe to EOF, handing each chunk to `deliver`.

    `closed` is done once EOF was read (or reading failed); the descriptor is
    then closed. `close()` stops reading early. `pause()` stops reading for a
    while: the child then blocks on its next write once the pipe is full, as on
    a slow terminal; `resume()` reads on. `read_remains()` reads what the pipe
    holds once nothing writes to it any more, paused or not.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fd: int, deliver: Callable[[bytes], None]
    ) -> None:
        self._loop = loop
        self._fd = fd
        self._deliver = deliver
        self.closed: asyncio.Future[None] = loop.create_future()
        self.paused = False
        # Bytes to read even while paused (`read_remains`): what the pipe held when its
        # writers were gone. A pause then holds back nobody; the reader takes the rest.
        self._remains = 0
        self._watching = False
        os.set_blocking(fd, False)
        self._watch()

    @property
    def held(self) -> bool:
        """Paused, and not reading what remains: output waits in the pipe."""
        return self._fd >= 0 and self.paused and self._remains == 0

    def pause(self) -> None:
        self.paused = True
        self._watch()

    def resume(self) -> None:
        self.paused = False
        self._watch()

    def read_remains(self) -> None:
        """Read what the pipe holds now, paused or not: its writers are gone, so that is
        at most the pipe's capacity, and holding it back would hold nobody back.

        Once that much was read without EOF, a pause holds again (something still
        writes: a process the tracking did not find).
        """
        if self._fd >= 0:
            self._remains = pipe_capacity(self._fd)
            self._watch()

    def _watch(self) -> None:
        """Watch the descriptor exactly while it is to be read."""
        wanted = self._fd >= 0 and not self.held
        if wanted and not self._watching:
            self._loop.add_reader(self._fd, self._read)
        elif self._watching and not wanted:
            self._loop.remove_reader(self._fd)
        self._watching = wanted

    def _read(self) -> None:
        size = min(READ_CHUNK, self._remains) if self.paused else READ_CHUNK
        try:
            data = os.read(self._fd, size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""  # EIO and the like: nothing more will come
        if not data:
            self.close()
            return
        if self._remains:
            self._remains = max(0, self._remains - len(data))
            self._watch()
        self._deliver(data)

    def close(self) -> None:
        if self._fd < 0:
            return
        if self._watching:
            self._loop.remove_reader(self._fd)
            self._watching = False
        os.close(self._fd)
        self._fd = -1
        if not self.closed.done():
            self.closed.set_result(None)


def pipe_capacity(fd: int) -> int:
    """How much the pipe `fd` can hold (Linux tells; elsewhere the size asked of `enlarge`,
    more than any pipe there holds)."""
    if hasattr(fcntl, "F_GETPIPE_SZ"):
        with contextlib.suppress(OSError):
            return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))
    return OUTPUT_PIPE_BYTES


class InputPipe:
    """Writes `data` to a child's stdin, then closes it; `closed` is done then.

    Kept open (`keep_open`), it takes more with `send` until `close`: a child
    that reads commands on its stdin (the cluster executor's bridge). A child
    that exits or closes its stdin early ends the write quietly: what it did
    not read is its own business, its exit status tells the rest.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fd: int,
        data: bytes | None,
        *,
        keep_open: bool = False,
    ) -> None:
        self._loop = loop
        self._fd = fd
        self._pending = bytearray(data or b"")
        self._keep_open = keep_open
        self._waiting = False
        self.closed: asyncio.Future[None] = loop.create_future()
        os.set_blocking(fd, False)
        self._write()

    def send(self, data: bytes) -> None:
        """Write more (a pipe kept open); nothing once it is closed."""
        if self._fd < 0:
            return
        self._pending += data
        if not self._waiting:
            self._write()

    def _write(self) -> None:
        while self._pending:
            try:
                written = os.write(self._fd, self._pending)
            except (BlockingIOError, InterruptedError):
                if not self._waiting:  # the pipe is full: go on once the child reads
                    self._loop.add_writer(self._fd, self._write)
                    self._waiting = True
                return
            except OSError:  # EPIPE: the reader is gone
                self.close()
                return
            del self._pending[:written]
        if self._waiting:
            self._loop.remove_writer(self._fd)
            self._waiting = False
        if not self._keep_open:
            self.close()

    def close(self) -> None:
        if self._fd < 0:
            return
        if self._waiting:
            self._loop.remove_writer(self._fd)
            self._waiting = False
        os.close(self._fd)
        self._fd = -1
        self._pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)
