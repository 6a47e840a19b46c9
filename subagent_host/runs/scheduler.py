"""The server-wide limit on running children: FIFO slots (protocol.md §8.4).

A child takes a slot before it starts and gives it back when it has ended; the
others wait `queued`, and slots are handed over strictly in arrival order.
"""

from __future__ import annotations

import asyncio
import collections


class Slots:
    """A FIFO counting limiter: `acquire()` waits its turn, `release()` hands the slot on."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._running = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def running(self) -> int:
        return self._running

    @property
    def free(self) -> int:
        """Slots nobody holds now: that many queued children can start without waiting."""
        return max(0, self._limit - self._running)

    @property
    def waiting(self) -> int:
        return sum(not waiter.done() for waiter in self._waiters)

    def try_acquire(self) -> bool:
        """Take a slot if one is free and nobody is waiting for it."""
        if self._running < self._limit and not self._waiters:
            self._running += 1
            return True
        return False

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot at the moment we gave up: pass it on
            else:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot moves to the next in line
                return
        self._running -= 1
