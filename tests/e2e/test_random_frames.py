"""Hundreds of random frames: every request answered exactly once, no notification answered.

Each generated item knows what it must be answered with (an id, a null-id
error, a batch array, or nothing), so the oracle does not reuse the server's
own classification code.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.e2e.harness import FramingName, frame, running_server


@attrs.frozen
class Item:
    """One generated frame and the answer it must get."""

    text: str
    # ("id", code-or-None for a result) | ("null", code) | ("batch", expectations) | ("none",)
    expect: tuple[Any, ...]


class Ids:
    def __init__(self) -> None:
        self.next = 0

    def take(self) -> int:
        self.next += 1
        return self.next


session_ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,20}", fullmatch=True)
scalars = st.one_of(st.integers(), st.text(max_size=10), st.booleans(), st.none())


def requests(ids: Ids) -> st.SearchStrategy[tuple[dict[str, Any], tuple[Any, ...]]]:
    """A request object and its expected answer: ("id", id, error code or None)."""

    def valid_ping(session: str | None) -> tuple[dict[str, Any], tuple[Any, ...]]:
        msg_id = ids.take()
        params = {} if session is None else {"sessionId": session}
        return {"jsonrpc": "2.0", "id": msg_id, "method": "ping", "params": params}, (
            "id",
            msg_id,
            None,
        )

    def unknown_method(name: str) -> tuple[dict[str, Any], tuple[Any, ...]]:
        msg_id = ids.take()
        return {"jsonrpc": "2.0", "id": f"s{msg_id}", "method": "x/" + name}, (
            "id",
            f"s{msg_id}",
            -32601,
        )

    def bad_params(value: Any) -> tuple[dict[str, Any], tuple[Any, ...]]:
        msg_id = ids.take()
        message = {"jsonrpc": "2.0", "id": msg_id, "method": "ping", "params": {"bogus": value}}
        return message, ("id", msg_id, -32602)

    def extra_member(value: Any) -> tuple[dict[str, Any], tuple[Any, ...]]:
        msg_id = ids.take()
        return {"jsonrpc": "2.0", "id": msg_id, "method": "ping", "extra": value}, (
            "id",
            msg_id,
            -32600,
        )

    return st.one_of(
        st.builds(valid_ping, st.none() | session_ids),
        st.builds(unknown_method, st.text(alphabet="abcdef/", min_size=1, max_size=8)),
        st.builds(bad_params, scalars),
        st.builds(extra_member, scalars),
    )


def notifications() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.just({"jsonrpc": "2.0", "method": "ping"}),
        st.builds(lambda n: {"jsonrpc": "2.0", "method": "x/" + n}, st.text(max_size=5)),
        st.builds(
            lambda i: {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": i}},
            st.integers(0, 10**6),
        ),
    )


def items(ids: Ids) -> st.SearchStrategy[Item]:
    single = requests(ids).map(lambda r: Item(json.dumps(r[0]), r[1]))
    notification = notifications().map(lambda n: Item(json.dumps(n), ("none",)))
    # No surrogates: the client sends UTF-8, which cannot carry them.
    characters = st.characters(exclude_characters="}\n\r", exclude_categories=["Cs"])
    garbage = st.text(alphabet=characters, max_size=30).map(
        lambda t: Item("{" + t, ("null", -32700))
    )
    not_an_object = scalars.map(lambda v: Item(json.dumps(v), ("null", -32600)))

    member = st.one_of(
        requests(ids).map(lambda r: (r[0], r[1])),
        notifications().map(lambda n: (n, ("none",))),
        scalars.map(lambda v: (v, ("null", -32600))),
    )

    def batch(members: list[tuple[Any, tuple[Any, ...]]]) -> Item:
        text = json.dumps([m for m, _ in members])
        if not members:
            return Item(text, ("null", -32600))
        answered = [e for _, e in members if e[0] != "none"]
        return Item(text, ("batch", tuple(answered)) if answered else ("none",))

    return st.one_of(
        single, notification, garbage, not_an_object, st.lists(member, max_size=6).map(batch)
    )


def answer_key(reply: dict[str, Any]) -> tuple[Any, ...]:
    if reply["id"] is None:
        return ("null", reply["error"]["code"])
    return ("id", reply["id"], reply["error"]["code"] if "error" in reply else None)


def expected_key(expect: tuple[Any, ...]) -> Any:
    if expect[0] == "batch":
        return ("batch", tuple(sorted(map(repr, expect[1]))))
    return expect


def received_key(reply: Any) -> Any:
    if isinstance(reply, list):
        return ("batch", tuple(sorted(repr(answer_key(r)) for r in reply)))
    return answer_key(reply)


@pytest.mark.parametrize("framing", ["ndjson", "lsp"])
@settings(
    max_examples=12,
    deadline=None,
    # Each example starts a server: shrinking would take minutes, and an
    # unshrunk failing example is still printed and reproducible.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_request_is_answered_once_and_no_notification_is(
    framing: FramingName, data: st.DataObject
) -> None:
    ids = Ids()
    # The first item must not be whitespace or garbage, or framing detection would see it.
    first = data.draw(requests(ids).map(lambda r: Item(json.dumps(r[0]), r[1])))
    rest = data.draw(st.lists(items(ids), min_size=20, max_size=60))
    asyncio.run(exchange(framing, [first, *rest]))


async def exchange(framing: FramingName, sent: list[Item]) -> None:
    sentinel = {"jsonrpc": "2.0", "id": "sentinel", "method": "ping"}
    async with running_server(framing=framing) as server:
        stream = [frame(item.text.encode(), framing) for item in sent]
        stream.append(frame(json.dumps(sentinel).encode(), framing))
        await server.send_raw(b"".join(stream))
        code, replies = await server.finish()
    assert code == 0
    # The server still answers ping after everything before it.
    assert any(
        r.get("id") == "sentinel" and r["result"]["pong"] for r in replies if isinstance(r, dict)
    )
    expected = Counter(expected_key(item.expect) for item in sent if item.expect[0] != "none")
    expected[("id", "sentinel", None)] += 1
    assert Counter(received_key(reply) for reply in replies) == expected
