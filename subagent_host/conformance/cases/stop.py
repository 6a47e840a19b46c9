"""`stop`: the whole tree ended, nothing left behind (protocol.md §8.3, §10).

The processes are learnt from the children themselves (each writes its own pid
and its descendants' to a file) and checked in /proc once `stop` has answered.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import processes
from ..registry import case, error_of, expect, expect_equal, result_of
from ..trial import Trial
from .steps import expect_status, only_child, sh, spawn_background, spawn_task, unknown_run_case


def survivors(t: Trial) -> list[int]:
    return [p.pid for p in t.learnt if processes.alive(p)]


async def stop_tree(
    t: Trial, script: Callable[[Path], str], count: int, grace_ms: int
) -> dict[str, Any]:
    """Run `script` (given the file its processes write their pids to) in the background,
    learn its `count` processes, then stop the run: the stopped run's snapshot."""
    conn = await t.start()
    pidfile = t.dir / "pids"
    run = await spawn_background(conn, {"command": sh(script(pidfile))})
    await t.learn_pids(pidfile, count)
    stopped: dict[str, Any] = result_of(
        await conn.request("stop", {"runId": run["runId"], "graceMs": grace_ms})
    )
    return stopped


@case("stop.no-process-left-behind", "§10")
async def whole_tree(t: Trial) -> None:
    # The child (a shell) starts a subshell that starts a sleep: child, grandchild, and more.
    stopped = await stop_tree(
        t,
        lambda pids: f"sh -c 'sleep 300 & echo $$ $! >> {pids}; wait' & echo $$ >> {pids}; wait",
        3,
        grace_ms=2000,
    )
    expect_status(stopped, "cancelled")
    expect_equal(stopped.get("alreadyTerminal"), False, "alreadyTerminal")
    expect_equal(stopped.get("reason"), "stopped by the client", "the default reason")
    expect(not survivors(t), "every process of the tree gone when stop answers", survivors(t))


@case("stop.escaped-process-ended", "§10")
async def escaped(t: Trial) -> None:
    # A double fork into a new session: the sleep leaves the child's tree and group.
    stopped = await stop_tree(
        t,
        lambda pids: (
            f"( setsid sh -c 'echo $$ >> {pids}; exec sleep 300' & ); "
            f"echo $$ >> {pids}; exec sleep 300"
        ),
        2,
        grace_ms=1000,
    )
    expect_status(stopped, "cancelled")
    expect(not survivors(t), "the escaped process ended too", survivors(t))


@case("stop.sigkill-after-grace", "§10")
async def sigkill(t: Trial) -> None:
    stopped = await stop_tree(
        t,
        lambda pids: f"trap '' TERM; echo $$ >> {pids}; while :; do sleep 0.2; done",
        1,
        grace_ms=300,
    )
    expect_equal(only_child(stopped).get("stoppedBy"), "sigkill", "the child's stoppedBy")
    expect(not survivors(t), "the child killed", survivors(t))


@case("stop.sigterm-within-grace", "§10")
async def sigterm(t: Trial) -> None:
    stopped = await stop_tree(
        t, lambda pids: f"echo $$ >> {pids}; exec sleep 300", 1, grace_ms=5000
    )
    expect_equal(only_child(stopped).get("stoppedBy"), "sigterm", "the child's stoppedBy")


@case("stop.reason-kept", "§10")
async def reason(t: Trial) -> None:
    conn = await t.start()
    run = await spawn_background(conn, {"command": ["sleep", "300"]})
    stopped = result_of(
        await conn.request("stop", {"runId": run["runId"], "graceMs": 0, "reason": "enough"})
    )
    expect_equal(stopped.get("reason"), "enough", "the run's reason")


@case("stop.already-terminal", "§10")
async def already(t: Trial) -> None:
    conn = await t.start()
    done = await spawn_task(conn, {"command": ["true"]})
    again = result_of(await conn.request("stop", {"runId": done["runId"]}))
    expect_status(again, "completed")
    expect_equal(again.get("alreadyTerminal"), True, "alreadyTerminal")


@case("stop.queued-child-never-starts", "§10")
async def queued(t: Trial) -> None:
    conn = await t.start("--max-concurrency", "1")
    marker = t.dir / "started"
    first = await spawn_background(conn, {"command": ["sleep", "300"]})
    second = await spawn_background(conn, {"command": ["touch", str(marker)]})
    stopped = result_of(await conn.request("stop", {"runId": second["runId"], "graceMs": 0}))
    expect_status(stopped, "cancelled")
    child = only_child(stopped)
    expect(
        "pid" not in child and "startedAt" not in child and not marker.exists(),
        "the queued child never started",
        child,
    )
    await conn.request("stop", {"runId": first["runId"], "graceMs": 0})


unknown_run_case("stop", "§10")


@case("stop.grace-out-of-range", "§10")
async def bad_grace(t: Trial) -> None:
    conn = await t.start()
    run = await spawn_background(conn, {"command": ["sleep", "300"]})
    error_of(await conn.request("stop", {"runId": run["runId"], "graceMs": -1}), -32602)
    await conn.request("stop", {"runId": run["runId"], "graceMs": 0})
