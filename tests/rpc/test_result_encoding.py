"""How a handler's result becomes the reply's bytes: encoded once while it is the same."""

from __future__ import annotations

import json
from typing import Any, cast

import attrs
import pytest
from cattrs import Converter

from subagent_host.rpc.dispatch import HostProtocol, Method, make_protocol
from subagent_host.rpc.framing import Parsed
from subagent_host.rpc.json_codec import encode_json


@attrs.frozen
class Empty:
    pass


@attrs.frozen
class Part:
    name: str


@attrs.frozen
class Settled:
    label: str
    parts: tuple[Part, ...]


@attrs.frozen
class HoldsList:
    items: list[str]


@attrs.define
class Changing:
    count: int


@attrs.define(eq=False)
class ChangingByIdentity:
    count: int


class Harness:
    """A protocol whose handlers answer whatever object the test holds."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.sent: list[bytes] = []
        self.unstructured = 0
        self.protocol: HostProtocol = make_protocol()
        self.protocol.attach({"get": Method(Empty, self.get)}, self.sent.append)
        self.protocol.converter = cast(Converter, _Counting(self.protocol.converter, self))

    def get(self, _params: Empty) -> Any:
        return self.answer

    def ask(self, msg_id: Any) -> bytes:
        self.protocol.receive(Parsed({"jsonrpc": "2.0", "id": msg_id, "method": "get"}))
        assert self.protocol.in_flight == 0  # a synchronous handler is answered inline
        return self.sent.pop()


class _Counting:
    """The protocol's converter, counting what it unstructures."""

    def __init__(self, converter: Any, harness: Harness) -> None:
        self._converter = converter
        self._harness = harness

    def unstructure(self, value: Any, *args: Any) -> Any:
        self._harness.unstructured += 1
        return self._converter.unstructure(value, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._converter, name)


async def test_the_very_result_answered_before_is_not_unstructured_or_encoded_again() -> None:
    rpc = Harness(Settled(label="x", parts=(Part("a"), Part("b"))))
    first, second = rpc.ask(1), rpc.ask(2)
    assert json.loads(first) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"label": "x", "parts": [{"name": "a"}, {"name": "b"}]},
    }
    assert second == first.replace(b'"id":1', b'"id":2')
    assert rpc.unstructured == 1


async def test_an_equal_but_new_result_is_encoded_afresh() -> None:
    rpc = Harness(Settled(label="x", parts=()))
    rpc.ask(1)
    rpc.answer = Settled(label="y", parts=())
    assert json.loads(rpc.ask(2))["result"] == {"label": "y", "parts": []}
    assert rpc.unstructured == 2


@pytest.mark.parametrize(
    "make, change",
    [
        (lambda: HoldsList(["a"]), lambda value: value.items.append("b")),
        (lambda: Changing(1), lambda value: setattr(value, "count", value.count + 1)),
        (lambda: ChangingByIdentity(1), lambda value: setattr(value, "count", value.count + 1)),
    ],
    ids=["frozen-holding-a-list", "mutable", "mutable-hashed-by-identity"],
)
async def test_a_result_that_can_change_is_encoded_afresh_each_time_so_the_change_shows(
    make: Any, change: Any
) -> None:
    rpc = Harness(make())
    answers = [json.loads(rpc.ask(1))["result"]]
    for msg_id in (2, 3):  # once unknown, then known to be a type that changes
        change(rpc.answer)
        answers.append(json.loads(rpc.ask(msg_id))["result"])
    assert answers in (
        [{"items": ["a"]}, {"items": ["a", "b"]}, {"items": ["a", "b", "b"]}],
        [{"count": 1}, {"count": 2}, {"count": 3}],
    )


@pytest.mark.parametrize("msg_id", [7, -3, 2**70, "a-1", 'q"é\\\u2028', "id-\ud800"])
async def test_a_reply_is_the_very_bytes_encoding_the_whole_response_makes(msg_id: Any) -> None:
    rpc = Harness(Settled(label="naïve", parts=(Part("\U0001f600"),)))
    expected = {
        "jsonrpc": "2.0",
        "id": msg_id,
        "result": {"label": "naïve", "parts": [{"name": "\U0001f600"}]},
    }
    reply = rpc.ask(msg_id)
    assert json.loads(reply) == expected
    if msg_id != "id-\ud800":  # a lone surrogate can only leave as an escape
        assert reply == encode_json(expected)
