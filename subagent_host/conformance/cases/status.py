"""`status`, catching up with `since`, sessions and history (protocol.md §9, §11, §13)."""

from __future__ import annotations

from .. import processes
from ..registry import case, error_of, expect, expect_equal, result_of
from ..trial import Trial
from .steps import expect_status, sh, spawn_background, spawn_task, unknown_run_case


@case("status.since-zero-every-event-from-seq-1", "§9")
async def since_zero(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": sh("echo a; echo b"), "stream": True})
    replay = result_of(await conn.request("status", {"runId": snapshot["runId"], "since": 0}))
    seqs = [e.get("seq") for e in replay.get("events", [])]
    expect_equal(seqs, list(range(1, replay.get("lastSeq", 0) + 1)), "seq 1..lastSeq, no gap")
    expect("firstRetainedSeq" not in replay, "no firstRetainedSeq (nothing dropped)", replay)
    live = [e.get("seq") for e in conn.events(snapshot["runId"])]
    expect_equal(seqs, live, "the replayed seqs, the same as the notifications'")


@case("status.since-n-only-later-events", "§9")
async def since_n(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": ["true"]})
    replay = result_of(await conn.request("status", {"runId": snapshot["runId"], "since": 2}))
    seqs = [e.get("seq") for e in replay.get("events", [])]
    expect_equal(seqs, list(range(3, snapshot["lastSeq"] + 1)), "the seqs after 2")
    plain = result_of(await conn.request("status", {"runId": snapshot["runId"]}))
    expect("events" not in plain, "no events without since", plain)


@case("status.lists-session-runs-newest-first", "§9")
async def listing(t: Trial) -> None:
    conn = await t.start()
    first = await spawn_task(conn, {"command": ["true"], "label": "first"})
    second = await spawn_task(conn, {"command": ["true"], "label": "second"})
    runs = result_of(await conn.request("status", {})).get("runs", [])
    expect_equal(
        [r.get("runId") for r in runs], [second["runId"], first["runId"]], "runs, newest first"
    )
    expect_equal(runs[0].get("label"), "second", "a summary's label")


unknown_run_case("status", "§9")


@case("status.run-id-prefix", "§9")
async def prefix(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": ["true"]})
    run_id = snapshot["runId"]
    found = result_of(await conn.request("status", {"runId": run_id[:8]}))
    expect_equal(found.get("runId"), run_id, "the run found by its first 8 characters")
    error_of(await conn.request("status", {"runId": run_id[:7]}), -32001, "for a 7-char prefix")


@case("status.other-session-is-not-found", "§13")
async def other_session(t: Trial) -> None:
    conn = await t.start("--session", "owner")
    snapshot = await spawn_task(conn, {"command": ["true"]})
    result_of(await conn.request("ping", {"sessionId": "stranger"}))
    error_of(await conn.request("status", {"runId": snapshot["runId"]}), -32001, "status")
    error_of(await conn.request("stop", {"runId": snapshot["runId"]}), -32001, "stop")
    expect_equal(result_of(await conn.request("status", {})).get("runs"), [], "the stranger's runs")


@case("status.history-outlives-the-server", "§13")
async def history(t: Trial) -> None:
    conn = await t.start("--session", "kept")
    snapshot = await spawn_task(conn, {"command": ["echo", "kept"]})
    expect_equal(await conn.finish(t.reply_timeout), 0, "the first server's exit status")
    again = await t.start("--session", "kept")
    found = result_of(await again.request("status", {"runId": snapshot["runId"]}))
    expect_equal(found.get("output", {}).get("text"), "kept\n", "the run's output, from disk")


@case("lifecycle.end-of-input-cancels-background-runs", "§6")
async def disconnect(t: Trial) -> None:
    conn = await t.start("--session", "gone", "--grace-ms", "500")
    pidfile = t.dir / "pids"
    snapshot = await spawn_background(conn, {"command": sh(f"echo $$ > {pidfile}; exec sleep 60")})
    (child,) = await t.learn_pids(pidfile, 1)
    expect_equal(await conn.finish(t.reply_timeout), 0, "the exit status at end of input")
    expect(not processes.alive(child), "the background child ended", f"pid {child.pid} alive")
    again = await t.start("--session", "gone")
    found = result_of(await again.request("status", {"runId": snapshot["runId"]}))
    expect_status(found, "cancelled")
    expect_equal(found.get("reason"), "client-disconnected", "reason")
