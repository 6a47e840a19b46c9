"""Interactive children of the `command` backend: turns, live messages, queue and steer,
interrupts, close, the idle timeout, and the refusals (protocol.md §23).

The child is a line program in `sh`: it answers each line with `got LINE`, except lines
starting `quiet` (its turn goes on: nothing printed), and ignores SIGINT, so that an
interrupt ends its turn, not the program (§23.3).
"""

from __future__ import annotations

from typing import Any, Final

from ..connection import Connection
from ..mismatch import Mismatch, short
from ..registry import case, error_of, expect, expect_equal, result_of
from ..trial import Trial
from .params import paths
from .steps import expect_status, only_child, sh, spawn_background

LINES: Final = (
    "trap '' INT; while IFS= read -r line; do "
    'case "$line" in quiet*) ;; *) printf \'got %s\\n\' "$line" ;; esac; done'
)
# The most one live message may hold, in UTF-8 (§23.2).
MAX_TEXT: Final = 64 * 1024


async def spawn_interactive(conn: Connection, **params: Any) -> str:
    """Spawn the line program interactive (prompt `hello` unless given): its run id."""
    snapshot = await spawn_background(
        conn, {"command": sh(LINES), "prompt": "hello", "interactive": True, **params}
    )
    run_id: str = snapshot["runId"]
    return run_id


def of_type(conn: Connection, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in conn.events(run_id) if e.get("type") == kind]


def turn_ends(conn: Connection, run_id: str) -> list[dict[str, Any]]:
    return [e for e in of_type(conn, run_id, "turn") if e.get("phase") == "end"]


async def turns_ended(conn: Connection, run_id: str, count: int) -> list[dict[str, Any]]:
    """Wait for the run's `count`-th `turn` `end` event: the turn ends so far."""
    await conn.wait_for(
        lambda _: len(turn_ends(conn, run_id)) >= count,
        f"{count} turn end events for run {run_id}",
    )
    return turn_ends(conn, run_id)


async def child_turn(conn: Connection, run_id: str) -> Any:
    """The child's `turn` in the run's snapshot now."""
    return only_child(await conn.result("status", {"runId": run_id})).get("turn")


def phases(conn: Connection, run_id: str) -> list[tuple[Any, Any]]:
    return [(e.get("phase"), e.get("stopReason")) for e in of_type(conn, run_id, "turn")]


def inputs(conn: Connection, run_id: str) -> list[tuple[Any, Any]]:
    return [(e.get("text"), e.get("state")) for e in of_type(conn, run_id, "input")]


async def send(conn: Connection, run_id: str, text: str, **params: Any) -> dict[str, Any]:
    sent: dict[str, Any] = result_of(
        await conn.request("run/send", {"runId": run_id, "text": text, **params}), "run/send"
    )
    expect(
        isinstance(sent.get("messageId"), str) and sent["messageId"] != "",
        "run/send's messageId, a string",
        sent,
    )
    return sent


async def close(conn: Connection, run_id: str) -> dict[str, Any]:
    closed: dict[str, Any] = result_of(
        await conn.request("run/close", {"runId": run_id}), "run/close"
    )
    return closed


def refusal(reply: Any, reason: str, what: str) -> dict[str, Any]:
    """The -32003 error's `data` of a refused request, which names `reason`."""
    data = error_of(reply, -32003, what).get("data")
    if not isinstance(data, dict) or data.get("reason") != reason:
        raise Mismatch(f"data.reason {reason!r} {what}", short(reply))
    return data


def output_text(snapshot: dict[str, Any]) -> Any:
    return snapshot.get("output", {}).get("text")


@case("interactive.turns-and-a-live-message", "§23.2")
async def turns_and_message(t: Trial) -> None:
    conn = await t.start()
    run_id = await spawn_interactive(conn, stream=True)
    await turns_ended(conn, run_id, 1)
    now = result_of(await conn.request("status", {"runId": run_id}))
    expect_status(now, "running")
    expect_equal(only_child(now).get("status"), "running", "the waiting child's status")
    expect_equal(only_child(now).get("turn"), {"count": 1, "state": "waiting"}, "the turn")
    sent = await send(conn, run_id, "again")
    expect_equal(sent.get("state"), "delivered", "the state of a message to a waiting child")
    await turns_ended(conn, run_id, 2)
    expect_equal(await child_turn(conn, run_id), {"count": 2, "state": "waiting"}, "the turn")
    expect_equal(
        phases(conn, run_id),
        [("start", None), ("end", "end_turn")] * 2,
        "the turn events' (phase, stopReason)",
    )
    expect_equal(inputs(conn, run_id), [("again", "delivered")], "the input events")
    event = of_type(conn, run_id, "input")[0]
    expect_equal(
        (event.get("messageId"), event.get("index")),
        (sent["messageId"], 0),
        "the input event's (messageId, index)",
    )
    streamed = "".join(str(e.get("text")) for e in of_type(conn, run_id, "output"))
    expect_equal(streamed, "got hello\ngot again\n", "the output events' text")
    closed = await close(conn, run_id)
    expect_status(closed, "completed")
    expect_equal(output_text(closed), "got hello\ngot again\n", "the closed run's output")


@case("interactive.queue-waits-steer-goes-in", "§23.2")
async def queue_and_steer(t: Trial) -> None:
    # Not streamed: `turn` and `input` events are sent all the same (§23.5).
    conn = await t.start()
    run_id = await spawn_interactive(conn, prompt="quiet")
    await conn.wait_for(lambda _: bool(of_type(conn, run_id, "turn")), "the first turn's start")
    expect_equal(await child_turn(conn, run_id), {"count": 1, "state": "running"}, "the turn")
    later = await send(conn, run_id, "later", delivery="queue")
    expect_equal(later.get("state"), "queued", "a queued message's state while a turn runs")
    now = await send(conn, run_id, "now", delivery="steer")
    expect_equal(now.get("state"), "delivered", "a steered message's state")
    await turns_ended(conn, run_id, 2)
    expect_equal(
        inputs(conn, run_id),
        [("later", "queued"), ("now", "delivered"), ("later", "delivered")],
        "the input events: queued, steered, then the queued one delivered at the turn's end",
    )
    ids = [e.get("messageId") for e in of_type(conn, run_id, "input")]
    expect_equal(ids, [later["messageId"], now["messageId"], later["messageId"]], "their ids")
    expect_equal(of_type(conn, run_id, "output"), [], "output events of a run not streamed")
    closed = await close(conn, run_id)
    expect_equal(output_text(closed), "got now\ngot later\n", "the closed run's output")


@case("interactive.interrupt-ends-the-turn-not-the-child", "§23.3")
async def interrupt(t: Trial) -> None:
    conn = await t.start()
    run_id = await spawn_interactive(conn)
    await turns_ended(conn, run_id, 1)
    idle = result_of(await conn.request("run/interrupt", {"runId": run_id}))
    expect_equal(
        idle, {"interrupted": False, "turn": {"count": 1, "state": "waiting"}}, "an idle interrupt"
    )
    await send(conn, run_id, "quiet")
    busy = result_of(await conn.request("run/interrupt", {"runId": run_id}))
    expect_equal(
        busy, {"interrupted": True, "turn": {"count": 2, "state": "running"}}, "an interrupt"
    )
    ends = await turns_ended(conn, run_id, 2)
    expect_equal(ends[1].get("stopReason"), "interrupted", "the interrupted turn's stopReason")
    again = await send(conn, run_id, "still there?")
    expect_equal(again.get("state"), "delivered", "a message after the interrupt")
    ends = await turns_ended(conn, run_id, 3)
    expect_equal(ends[2].get("stopReason"), "end_turn", "the next turn's stopReason")
    closed = await close(conn, run_id)
    expect_status(closed, "completed")
    expect_equal(output_text(closed), "got hello\ngot still there?\n", "the output")


@case("interactive.close-completed-then-already-terminal", "§23.3")
async def close_twice(t: Trial) -> None:
    conn = await t.start()
    run_id = await spawn_interactive(conn)
    await turns_ended(conn, run_id, 1)
    closed = await close(conn, run_id)
    expect_status(closed, "completed")
    child = only_child(closed)
    expect_equal(
        (child.get("status"), child.get("turn")),
        ("completed", {"count": 1, "state": "waiting"}),
        "the closed child's (status, turn)",
    )
    expect(closed.get("alreadyTerminal") is not True, "no alreadyTerminal: it ran", closed)
    again = await close(conn, run_id)
    expect_status(again, "completed")
    expect_equal(again.get("alreadyTerminal"), True, "alreadyTerminal of a second close")
    for method, params in (("run/send", {"text": "late"}), ("run/interrupt", {})):
        data = refusal(
            await conn.request(method, {"runId": run_id, **params}),
            "not-running",
            f"for {method} to a closed child",
        )
        expect_equal(data.get("runId"), run_id, "data.runId")


@case("interactive.idle-timeout-closes-completed", "§23.2")
async def idle_timeout(t: Trial) -> None:
    conn = await t.start()
    run_id = await spawn_interactive(conn, idleTimeoutMs=300)
    await conn.terminal_event(run_id)
    ended = result_of(await conn.request("status", {"runId": run_id}))
    expect_status(ended, "completed")
    expect_equal(only_child(ended).get("turn"), {"count": 1, "state": "waiting"}, "the turn")
    expect_equal(output_text(ended), "got hello\n", "the output")
    data = refusal(
        await conn.request("run/send", {"runId": run_id, "text": "late", "index": 0}),
        "not-running",
        "for a message to an ended run",
    )
    expect_equal(data, {"reason": "not-running", "runId": run_id, "index": 0}, "the data")


@case("interactive.not-interactive-refused", "§23.2")
async def not_interactive(t: Trial) -> None:
    conn = await t.start()
    run = await spawn_background(conn, {"command": ["sleep", "30"]})
    run_id = run["runId"]
    requests: list[tuple[str, dict[str, Any]]] = [
        ("run/send", {"text": "hello"}),
        ("run/send", {"text": "hello", "index": 0}),
        ("run/interrupt", {"index": 0}),
        ("run/close", {"index": 0}),
    ]
    for method, params in requests:
        data = refusal(
            await conn.request(method, {"runId": run_id, **params}),
            "not-interactive",
            f"for {method} {short(params)} to a child that is not interactive",
        )
        expect_equal(data.get("runId"), run_id, "data.runId")
        if "index" in params:
            expect_equal(data.get("index"), 0, "data.index")
    await conn.request("stop", {"runId": run_id, "graceMs": 0})


@case("interactive.send-params-refused", "§23.2")
async def send_params(t: Trial) -> None:
    conn = await t.start()
    run_id = await spawn_interactive(conn)
    await turns_ended(conn, run_id, 1)
    refused: list[tuple[str, dict[str, Any], str]] = [
        ("index out of range", {"text": "hi", "index": 1}, "index"),
        ("empty text", {"text": ""}, "text"),
        ("64 KiB + 1 bytes", {"text": "quiet" + "x" * (MAX_TEXT - 4)}, "text"),
        ("64 KiB of two-byte characters + 1", {"text": "é" * (MAX_TEXT // 2) + "x"}, "text"),
    ]
    for what, params, path in refused:
        error = error_of(
            await conn.request("run/send", {"runId": run_id, **params}), -32602, f"for {what}"
        )
        expect_equal(paths(error), [path], f"the problems' paths for {what}")
    expect_equal(of_type(conn, run_id, "input"), [], "input events of refused messages")
    full = await send(conn, run_id, "quiet" + "x" * (MAX_TEXT - 5))
    expect_equal(full.get("state"), "delivered", "a message of exactly 64 KiB")
    await conn.request("stop", {"runId": run_id, "graceMs": 0})


@case("interactive.permit-not-pending", "§23.4")
async def permit_unknown(t: Trial) -> None:
    conn = await t.start()
    run_id = await spawn_interactive(conn)
    await turns_ended(conn, run_id, 1)
    data = refusal(
        await conn.request(
            "run/permit", {"runId": run_id, "permissionId": "0.no-such", "optionId": "allow"}
        ),
        "not-pending",
        "for an unknown permission",
    )
    expect_equal(
        data,
        {"reason": "not-pending", "runId": run_id, "permissionId": "0.no-such"},
        "the refusal's data",
    )
    await close(conn, run_id)


@case("interactive.task-mode-invalid", "§23.1")
async def task_mode(t: Trial) -> None:
    conn = await t.start()
    error = error_of(
        await conn.request("spawn", {"command": sh(LINES), "interactive": True, "mode": "task"}),
        -32602,
        "for an interactive child in task mode",
    )
    expect_equal(paths(error), ["interactive"], "the problems' paths")
    expect_equal(result_of(await conn.request("status", {}))["runs"], [], "runs")


@case("interactive.unknown-run", "§23.2")
async def unknown_run(t: Trial) -> None:
    conn = await t.start()
    nowhere = {"runId": "0123456789abcdef"}
    requests: list[tuple[str, dict[str, Any]]] = [
        ("run/send", {**nowhere, "text": "hello"}),
        ("run/interrupt", nowhere),
        ("run/close", nowhere),
        ("run/permit", {**nowhere, "permissionId": "0.no-such", "optionId": "allow"}),
    ]
    for method, params in requests:
        error_of(await conn.request(method, params), -32001, f"for {method} to no run")
