"""Cancellation and detaching (protocol.md §3.5, §8.5, §8.6)."""

from __future__ import annotations

from ..mismatch import Mismatch, short
from ..registry import case, error_of, expect, expect_equal, result_of
from ..trial import Trial
from .steps import expect_status, sh, still_serving


@case("cancel.task-spawn-answered-32800-with-snapshot", "§3.5")
async def cancel_task(t: Trial) -> None:
    conn = await t.start()
    pidfile = t.dir / "pids"
    await conn.call(
        "spawn", {"command": sh(f"echo $$ > {pidfile}; exec sleep 60"), "mode": "task"}, 10
    )
    await t.learn_pids(pidfile, 1)
    await conn.notify("$/cancelRequest", {"id": 10})
    error = error_of(await conn.reply(10), -32800, "for the cancelled task")
    snapshot = error.get("data")
    if not isinstance(snapshot, dict):
        raise Mismatch("the run's final snapshot as error.data", short(error))
    expect_status(snapshot, "cancelled")
    from .. import processes

    expect(
        not any(processes.alive(p) for p in t.learnt),
        "the child gone once the cancelled request is answered",
        [p.pid for p in t.learnt if processes.alive(p)],
    )


@case("cancel.unknown-id-does-nothing", "§3.5")
async def cancel_unknown(t: Trial) -> None:
    conn = await t.start()
    await conn.notify("$/cancelRequest", {"id": 999})
    await conn.notify("$/cancelRequest", {"id": "never-sent"})
    await still_serving(conn, "after")
    expect_equal(len(conn.log), 1, "messages received (only the ping's answer)")


@case("cancel.finished-request-does-nothing", "§3.5")
async def cancel_finished(t: Trial) -> None:
    conn = await t.start()
    result_of(await conn.request("ping", None, 1))
    await conn.notify("$/cancelRequest", {"id": 1})
    await still_serving(conn, "after")
    expect_equal(len(conn.answers(1)), 1, "answers with id 1")
    expect_equal(len(conn.log), 2, "messages received (two ping answers)")


@case("cancel.other-dollar-notifications-ignored", "§3.5")
async def dollar(t: Trial) -> None:
    conn = await t.start()
    await conn.notify("$/setTrace", {"value": "verbose"})
    await conn.notify("$/somethingNew", {})
    await still_serving(conn, "after")
    expect_equal(len(conn.log), 1, "messages received (only the ping's answer)")


@case("detach.answers-waiting-task-with-current-snapshot", "§8.6")
async def detach(t: Trial) -> None:
    conn = await t.start()
    await conn.call("spawn", {"command": sh("sleep 30"), "mode": "task"}, "task")
    run_id = await conn.first_run_id()
    await conn.notify("run/detach", {"runId": run_id})
    snapshot = result_of(await conn.reply("task"), "the detached task")
    expect(
        snapshot.get("status") in ("queued", "running"),
        "the current (not terminal) snapshot",
        snapshot.get("status"),
    )
    stopped = result_of(await conn.request("stop", {"runId": run_id, "graceMs": 0}))
    expect_status(stopped, "cancelled")


@case("detach.as-request-is-method-not-found", "§8.6")
async def detach_request(t: Trial) -> None:
    conn = await t.start()
    error_of(await conn.request("run/detach", {"runId": "x"}), -32601)
