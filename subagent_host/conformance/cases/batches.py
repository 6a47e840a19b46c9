"""Batches (protocol.md §3.4)."""

from __future__ import annotations

from typing import Any

from ..connection import Connection, encode, frame, is_response
from ..mismatch import Mismatch, short
from ..registry import case, expect, expect_equal
from ..trial import Trial
from .steps import still_serving


async def batch(t: Trial, members: Any) -> Connection:
    conn = await t.start()
    await conn.send_raw(frame(encode(members), t.framing))
    return conn


async def array_answer(conn: Connection) -> list[Any]:
    answer = await conn.wait_for(lambda m: isinstance(m, list) or is_response(m), "the answer")
    if not isinstance(answer, list):
        raise Mismatch("one array answering the batch", short(answer))
    return answer


@case("batch.mixed", "§3.4")
async def mixed(t: Trial) -> None:
    conn = await batch(
        t,
        [
            {"jsonrpc": "2.0", "id": "a", "method": "ping"},
            {"jsonrpc": "2.0", "method": "ping"},
            {"foo": "boo"},
            {"jsonrpc": "2.0", "id": "b", "method": "no/such-method"},
        ],
    )
    answer = await array_answer(conn)
    expect_equal([m.get("id") for m in answer], ["a", None, "b"], "the answers' ids, in order")
    expect("result" in answer[0], "a result for the ping", answer[0])
    expect_equal(answer[1].get("error", {}).get("code"), -32600, "the invalid member's code")
    expect_equal(answer[2].get("error", {}).get("code"), -32601, "the unknown method's code")


@case("batch.empty-is-one-error", "§3.4")
async def empty(t: Trial) -> None:
    conn = await batch(t, [])
    answer = await conn.wait_for(lambda m: isinstance(m, list) or is_response(m), "an answer")
    expect(
        isinstance(answer, dict) and answer.get("error", {}).get("code") == -32600,
        "one -32600 object (not an array)",
        answer,
    )


@case("batch.invalid-member", "§3.4")
async def invalid_member(t: Trial) -> None:
    conn = await batch(t, [1])
    answer = await array_answer(conn)
    expect(
        len(answer) == 1
        and answer[0].get("id", "absent") is None
        and answer[0].get("error", {}).get("code") == -32600,
        '[{"id": null, "error": {"code": -32600, ...}}]',
        answer,
    )


@case("batch.nested-array-member", "§3.4")
async def nested(t: Trial) -> None:
    conn = await batch(t, [[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]])
    answer = await array_answer(conn)
    expect(
        len(answer) == 1 and answer[0].get("error", {}).get("code") == -32600,
        "the nested array answered as one invalid request",
        answer,
    )


@case("batch.only-notifications-unanswered", "§3.4")
async def only_notifications(t: Trial) -> None:
    conn = await batch(
        t, [{"jsonrpc": "2.0", "method": "ping"}, {"jsonrpc": "2.0", "method": "ping"}]
    )
    await still_serving(conn, "after")
    expect_equal(len(conn.log), 1, "messages received (only the ping's answer)")


@case("batch.answered-when-its-last-member-is", "§3.4")
async def slowest(t: Trial) -> None:
    conn = await batch(
        t,
        [
            {"jsonrpc": "2.0", "id": "fast", "method": "ping"},
            {
                "jsonrpc": "2.0",
                "id": "slow",
                "method": "spawn",
                "params": {"command": ["sleep", "0.3"], "mode": "task"},
            },
        ],
    )
    answer = await array_answer(conn)
    expect_equal([m.get("id") for m in answer], ["fast", "slow"], "the answers' ids")
    expect_equal(answer[1]["result"]["status"], "completed", "the task's status in the batch")
