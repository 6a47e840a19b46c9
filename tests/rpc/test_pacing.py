"""Paced methods: their replies are made one at a time, in the order read, as the output drains."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import attrs
import pytest

from subagent_host.rpc import dispatch
from subagent_host.rpc.dispatch import HostProtocol, Method, make_protocol
from subagent_host.rpc.framing import Parsed
from tests.waits import loop_turns


@attrs.frozen
class Empty:
    pass


class Harness:
    """A protocol whose output is 'full' after every `big` reply until `drain()`."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.started: list[str] = []
        self.writable = asyncio.Event()
        self.writable.set()
        self.proceed = asyncio.Event()
        self.protocol: HostProtocol = make_protocol()
        self.protocol.attach(
            {
                "big": Method(Empty, self.big, paced=True),
                "small": Method(Empty, self.small),
            },
            self.emit,
            self.writable.wait,
        )
        self._next = 0

    async def big(self, _params: Empty) -> dict[str, int]:
        self._next += 1
        self.started.append(f"big{self._next}")
        await self.proceed.wait()
        return {"n": self._next}

    async def small(self, _params: Empty) -> dict[str, bool]:
        self.started.append("small")
        return {"small": True}

    def emit(self, body: bytes) -> None:
        reply = json.loads(body)
        self.sent.append(reply)
        if isinstance(reply, dict) and "n" in reply.get("result", {}):
            self.writable.clear()  # a large reply fills the outgoing queue

    def send(self, msg_id: int, method: str) -> None:
        self.protocol.receive(Parsed({"jsonrpc": "2.0", "id": msg_id, "method": method}))


async def test_paced_replies_are_made_one_at_a_time_each_once_the_output_drained() -> None:
    rpc = Harness()
    for msg_id in (1, 2, 3):
        rpc.send(msg_id, "big")
    rpc.send(4, "small")
    await loop_turns(5)
    # The first is being made; the others wait their turn; other methods do not wait.
    assert rpc.started == ["big1", "small"]
    assert [reply["id"] for reply in rpc.sent] == [4]
    rpc.proceed.set()
    await loop_turns(5)
    assert [reply["id"] for reply in rpc.sent] == [4, 1]
    assert rpc.started == ["big1", "small"]  # the output is full: nothing more is made
    rpc.writable.set()  # the client read it
    await loop_turns(5)
    assert rpc.started == ["big1", "small", "big2"]
    assert [reply["id"] for reply in rpc.sent] == [4, 1, 2]
    rpc.writable.set()
    await asyncio.wait_for(rpc.protocol.wait_answered(), 5)
    assert [reply.get("result") for reply in rpc.sent] == [
        {"small": True},
        {"n": 1},
        {"n": 2},
        {"n": 3},
    ]


async def test_a_paced_request_cancelled_in_its_wait_is_answered_and_never_run() -> None:
    rpc = Harness()
    rpc.writable.clear()  # a client that does not read
    rpc.send(1, "big")
    rpc.send(2, "big")
    await loop_turns(5)
    assert rpc.started == []
    rpc.protocol.receive(
        Parsed({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}})
    )
    await loop_turns(5)
    assert rpc.sent == [
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32800, "message": "request cancelled"}}
    ]
    rpc.proceed.set()
    rpc.writable.set()
    await asyncio.wait_for(rpc.protocol.wait_answered(), 5)
    assert rpc.started == ["big1"] and rpc.sent[1] == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {"n": 1},
    }


async def test_paced_members_of_batches_are_refused_once_batches_hold_too_much(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A batch's answer is sent whole: its replies add up until its last member answers.
    monkeypatch.setattr(dispatch, "BATCH_ANSWERS_BYTES", 60)  # two replies' worth
    rpc = Harness()
    rpc.proceed.set()
    batch = [{"jsonrpc": "2.0", "id": n, "method": "big"} for n in (1, 2, 3)]
    rpc.protocol.receive(Parsed(batch))
    rpc.protocol.receive(Parsed([{"jsonrpc": "2.0", "id": 4, "method": "big"}]))
    await asyncio.wait_for(rpc.protocol.wait_answered(), 5)
    refused = {
        "code": -32600,
        "message": "invalid request: unfinished batches already hold 0 MiB of answers;"
        " send this request alone",
    }
    assert rpc.sent == [
        [
            {"jsonrpc": "2.0", "id": 1, "result": {"n": 1}},
            {"jsonrpc": "2.0", "id": 2, "result": {"n": 2}},
            {"jsonrpc": "2.0", "id": 3, "error": refused},
        ],
        [{"jsonrpc": "2.0", "id": 4, "result": {"n": 3}}],  # the first batch was sent: room
    ]
    assert rpc.started == ["big1", "big2", "big3"]
