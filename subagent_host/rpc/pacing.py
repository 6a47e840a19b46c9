"""Replies made at the client's pace: one at a time, in the order read, each once the output drains.

The outgoing queue stops the server from reading more requests once 4 MiB wait
for the client (rpc/stdio.py), but the requests already read are answered
anyway, and a few tiny ones can each ask for a large reply (`status {since}`:
up to 8 MiB of events). Built together, the replies to forty such requests
piped at once would all be in memory before the queue's bound could apply.
A method whose reply may be large is therefore marked `paced` in the method
table: dispatch runs its handler only in its turn (`ReplyPacer.turn`), which
starts once every paced request read before it has been answered and the
output waits less than the queue's low-water mark. So beyond the queue itself,
at most one such reply is ever being made. protocol.md §6 ("Flow control").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable


async def _always_writable() -> None:
    return None


class ReplyPacer:
    """Hands out turns to make a reply, in the order asked, each once the output is writable."""

    def __init__(self, writable: Callable[[], Awaitable[object]] = _always_writable) -> None:
        self._writable = writable
        # asyncio.Lock wakes its waiters in the order they came: the order requests were read.
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for this request's turn; hold it until the block (the reply emitted) is left.

        Called by dispatch around a paced handler and its answer. The output is
        asked inside the lock, after the reply before it was emitted: a large one
        fills the queue, and the next waits until the client has read it down.
        """
        async with self._lock:
            await self._writable()
            yield
