"""The connection's output: what is emitted leaves in as few writes as the rules allow."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import cast

from subagent_host.rpc.connection import HOLD_MAX_S, Connection
from subagent_host.rpc.dispatch import HostProtocol
from subagent_host.rpc.framing import AutoDecoder
from subagent_host.rpc.stdio import OutputStream


class Writes:
    """An output stream that keeps each write apart."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.wrote = asyncio.Event()

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        self.wrote.set()

    async def drain(self) -> None:
        pass

    def watch_backlog(self, full: Callable[[], None], drained: Callable[[], None]) -> None:
        pass


def connection(output: Writes) -> Connection:
    # emit and flush touch neither the protocol nor the decoder
    return Connection(
        cast(HostProtocol, None), AutoDecoder(1 << 20, None), cast(OutputStream, output)
    )


async def turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)  # one turn of the loop each: the flush is counted in turns


async def test_what_is_emitted_in_one_turn_leaves_in_one_write_two_turns_later() -> None:
    output = Writes()
    wire = connection(output)
    wire.emit(b'{"a":1}')
    wire.emit(b'{"b":2}')
    await turns(3)
    assert output.writes == [b'{"a":1}\n{"b":2}\n']


async def test_events_emitted_during_a_hold_leave_in_one_write_with_the_answer_after_it() -> None:
    output = Writes()
    wire = connection(output)
    with wire.holding():
        wire.emit(b'{"event":1}')
        await turns(5)  # a commit that takes a few turns
        assert output.writes == []
        wire.emit(b'{"event":2}')
    wire.emit(b'{"id":1}')  # the answer, emitted in the step that leaves the hold
    await turns(3)
    assert output.writes == [b'{"event":1}\n{"event":2}\n{"id":1}\n']


async def test_a_hold_keeps_output_back_no_longer_than_its_cap() -> None:
    output = Writes()
    wire = connection(output)
    loop = asyncio.get_running_loop()
    with wire.holding():
        started = loop.time()
        wire.emit(b'{"event":1}')
        await asyncio.wait_for(output.wrote.wait(), 10 * HOLD_MAX_S + 5)
        assert loop.time() - started >= HOLD_MAX_S * 0.9
        assert output.writes == [b'{"event":1}\n']
        wire.emit(b'{"event":2}')  # once the cap is over, output flows as without a hold
        await turns(3)
        assert output.writes == [b'{"event":1}\n', b'{"event":2}\n']


async def test_output_waits_for_the_last_of_two_holds() -> None:
    output = Writes()
    wire = connection(output)
    with wire.holding():
        with wire.holding():
            wire.emit(b'{"event":1}')
        await turns(5)
        assert output.writes == []
    await turns(3)
    assert output.writes == [b'{"event":1}\n']


async def test_overlapping_holds_keep_output_back_no_longer_than_one_cap() -> None:
    """A steady stream of requests, each holding before the last one let go, must not
    hold a notification back for ever: what one hold kept leaves when its cap is over."""
    output = Writes()
    wire = connection(output)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with contextlib.ExitStack() as holds:
        holds.enter_context(wire.holding())
        wire.emit(b'{"event":1}')
        async with asyncio.timeout(20 * HOLD_MAX_S + 5):
            while not output.writes:  # each new hold starts before the cap of the last
                holds.enter_context(wire.holding())
                await asyncio.sleep(HOLD_MAX_S / 4)
    assert output.writes[0] == b'{"event":1}\n'
    assert loop.time() - started < 10 * HOLD_MAX_S
