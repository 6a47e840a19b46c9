"""Lines read from standard input without blocking the event loop (`run -i`).

A terminal in its usual (canonical) mode edits and echoes the line itself and hands it
over whole once Enter is pressed, or what was typed when Ctrl-D is: the descriptor is
watched (`add_reader`) and read once it is readable, so a read never waits. A pipe is
read the same way. A regular file cannot be watched (it is always readable): it is read
at once, as a read of a file on disk does not wait for anyone.

The descriptor is never made non-blocking: that flag belongs to the open file, which a
terminal shares with the shell, and would be left to it.
"""

from __future__ import annotations

import asyncio
import os
from typing import Final

CHUNK: Final = 64 * 1024


class LineInput:
    """The lines of one descriptor, in order; what was read beyond a line is kept for the
    next, also when a caller stops waiting (is cancelled) halfway through one."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self.ended = False
        """Whether its end was read (Ctrl-D on a terminal, a pipe's or a file's end)."""

    async def line(self) -> str | None:
        """The next line, without its newline (decoded as UTF-8, errors replaced); None at
        the end. A last line without a newline is a line."""
        while b"\n" not in self._buffer and not self.ended:
            await self._readable()
            try:
                data = os.read(self._fd, CHUNK)
            except BlockingIOError:  # another reader of the same terminal took it first
                continue
            except OSError:  # a closed or unreadable stdin (`run -i <&-`): nothing to read
                data = b""
            if not data:
                self.ended = True
            self._buffer += data
        if b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
        elif self._buffer:
            line, self._buffer = self._buffer, b""
        else:
            return None
        return line.decode("utf-8", "replace").removesuffix("\r")

    async def _readable(self) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(self._fd, wake)
        except (ValueError, OSError):  # a regular file (EPERM), or no descriptor
            return
        try:
            await ready
        finally:
            loop.remove_reader(self._fd)
