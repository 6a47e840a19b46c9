"""Requests and notifications, strictly (protocol.md §3.2, §4)."""

from __future__ import annotations

from typing import Any

from ..connection import encode, frame
from ..mismatch import short
from ..registry import case, error_of, expect, expect_equal, result_of
from ..trial import Trial
from .steps import sh, still_serving


async def send_object(t: Trial, message: dict[str, Any]) -> Any:
    """Send one message as given; return the conection."""
    conn = await t.start()
    await conn.send_raw(frame(encode(message), t.framing))
    return conn


@case("jsonrpc.id.integer-echoed", "§3.2")
async def id_integer(t: Trial) -> None:
    conn = await t.start()
    reply = await conn.request("ping", None, 9007199254740993)
    expect(
        reply.get("id") == 9007199254740993 and type(reply.get("id")) is int,
        "the integer id 9007199254740993 echoed exactly, as an integer",
        reply.get("id"),
    )


@case("jsonrpc.id.string-echoed", "§3.2")
async def id_string(t: Trial) -> None:
    conn = await t.start()
    reply = await conn.request("ping", None, "1")
    expect(reply.get("id") == "1", 'the string id "1" echoed as a string', reply.get("id"))
    reply = await conn.request("ping", None, "é 🙂")
    expect(reply.get("id") == "é 🙂", "a non-ASCII string id echoed unchanged", reply.get("id"))


async def id_refused(t: Trial, msg_id: Any, written: str) -> None:
    """An id that is not a string or an integer: -32600, answered with id null."""
    conn = await send_object(t, {"jsonrpc": "2.0", "id": msg_id, "method": "ping"})
    reply = await conn.wait_for(lambda m: isinstance(m, dict), "one answer")
    error_of(reply, -32600, f"for id {written}")
    expect_equal(reply.get("id", "absent"), None, "the answer's id")


@case("jsonrpc.id.null-refused", "§3.2")
async def id_null(t: Trial) -> None:
    await id_refused(t, None, "null")


@case("jsonrpc.id.fractional-refused", "§3.2")
async def id_fraction(t: Trial) -> None:
    await id_refused(t, 1.5, "1.5")


@case("jsonrpc.id.boolean-refused", "§3.2")
async def id_bool(t: Trial) -> None:
    await id_refused(t, True, "true")


@case("jsonrpc.version-must-be-2.0", "§3.2")
async def version(t: Trial) -> None:
    conn = await send_object(t, {"jsonrpc": "1.0", "id": "v", "method": "ping"})
    error_of(await conn.reply("v"), -32600, "with the request's id")


@case("jsonrpc.method-must-be-string", "§3.2")
async def method_type(t: Trial) -> None:
    conn = await send_object(t, {"jsonrpc": "2.0", "method": 1, "params": "bar"})
    error_of(await conn.reply(None, "-32600 with id null"), -32600)


@case("jsonrpc.params-must-be-structured", "§3.2")
async def params_type(t: Trial) -> None:
    conn = await send_object(t, {"jsonrpc": "2.0", "id": 3, "method": "ping", "params": "x"})
    error_of(await conn.reply(3), -32600, "for params that are a string")


@case("jsonrpc.unknown-member-refused", "§3.2")
async def unknown_member(t: Trial) -> None:
    conn = await send_object(t, {"jsonrpc": "2.0", "id": 4, "method": "ping", "extra": 1})
    error = error_of(await conn.reply(4), -32600, "naming the unknown member")
    expect("extra" in str(error.get("message")), "the message to name 'extra'", error)


@case("jsonrpc.response-refused", "§3.2")
async def response(t: Trial) -> None:
    conn = await send_object(t, {"jsonrpc": "2.0", "id": 5, "result": 1})
    error_of(await conn.reply(5), -32600, "for a response sent to the server")


@case("jsonrpc.method-not-found", "§4")
async def not_found(t: Trial) -> None:
    conn = await t.start()
    error = error_of(await conn.request("no/such-method"), -32601)
    expect("no/such-method" in str(error.get("message")), "the message to name it", error)


@case("jsonrpc.notification-never-answered", "§3.2")
async def notification(t: Trial) -> None:
    conn = await t.start()
    await conn.notify("ping")
    await still_serving(conn, "after")
    expect_equal([short(m.get("id")) for m in conn.responses()], ['"after"'], "the ids answered")


@case("jsonrpc.failing-notification-never-answered", "§3.2")
async def failing_notification(t: Trial) -> None:
    conn = await t.start()
    await conn.notify("ping", {"colour": "red"})
    await conn.notify("no/such-method", {})
    await conn.notify("status", {"runId": "no-such-run-at-all"})
    await still_serving(conn, "after")
    expect_equal([short(m.get("id")) for m in conn.responses()], ['"after"'], "the ids answered")


@case("jsonrpc.id-in-flight-refused", "§3.2")
async def id_in_flight(t: Trial) -> None:
    conn = await t.start()
    await conn.call("spawn", {"command": sh("sleep 30"), "mode": "task"}, 7)
    run_id = await conn.first_run_id()
    error_of(await conn.request("ping", None, 7), -32600, "for a second request with id 7")
    expect_equal(len(conn.answers(7)), 1, "answers with id 7 so far")
    result_of(await conn.request("stop", {"runId": run_id, "graceMs": 0}))
    spawned = await conn.wait_for(
        lambda m: isinstance(m, dict) and m.get("id") == 7 and "result" in m,
        "the first request with id 7 answered as usual",
    )
    expect_equal(spawned["result"]["status"], "cancelled", "the stopped task's status")


@case("jsonrpc.answers-in-order-of-finishing", "§3.2")
async def out_of_order(t: Trial) -> None:
    conn = await t.start()
    await conn.call("spawn", {"command": sh("sleep 30"), "mode": "task"}, "slow")
    run_id = await conn.first_run_id()
    result_of(await conn.request("ping", None, "fast"), "a ping answered while a task waits")
    expect(not conn.answers("slow"), "the task still unanswered", conn.answers("slow"))
    await conn.request("stop", {"runId": run_id, "graceMs": 0})
    await conn.reply("slow")
