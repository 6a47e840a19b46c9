"""FIFO slots: the limit holds, waiters start in arrival order, cancellation frees nothing twice."""

from __future__ import annotations

import asyncio

from subagent_host.runs.scheduler import Slots
from tests.waits import loop_turns


async def test_the_limit_holds_and_waiters_start_in_arrival_order() -> None:
    slots = Slots(2)
    order: list[int] = []
    gates = [asyncio.Event() for _ in range(6)]

    async def job(n: int) -> None:
        await slots.acquire()
        order.append(n)
        try:
            assert slots.running <= 2
            await gates[n].wait()
        finally:
            slots.release()

    tasks = [asyncio.create_task(job(n)) for n in range(6)]
    await loop_turns()  # every job has run as far as it can: two hold slots, four wait
    assert order == [0, 1] and slots.waiting == 4
    for n in (1, 0, 2, 3, 4, 5):
        gates[n].set()
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4, 5]
    assert slots.running == 0


async def test_a_cancelled_waiter_leaves_the_queue_without_taking_a_slot() -> None:
    slots = Slots(1)
    await slots.acquire()
    waiting = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert slots.waiting == 0
    slots.release()
    assert slots.running == 0
    await slots.acquire()  # free again
    assert slots.running == 1
