"""Run history that outlives the server process: crashes, restarts, sessions and prefixes.

Every test starts real servers on one `--state-dir` and proves that no process
of any run it started survives it: `running_server` checks the runs of a server
that exits normally; for a server the test SIGKILLs, the test takes that
server's run ids over and waits (bounded) until a restarted server has ended
every process carrying one of them in `SUBAGENT_HOST_RUN_ID`.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import psutil

from subagent_host.rpc.control_socket import socket_path
from subagent_host.store.browse import StateBrowser
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    TERMINAL,
    ServerProcess,
    assert_no_run_survives,
    error_of,
    kill_with_its_guardian,
    marked_processes,
    result_of,
    running_server,
    state_args,
)
from tests.e2e.wal import committed_transactions
from tests.waits import still_running

DB_NAME: Final = "subagent-host.sqlite3"
WAL_NAME: Final = "subagent-host.sqlite3-wal"
RUN_MARKER: Final = "SUBAGENT_HOST_RUN_ID"
LEFTOVER_TIMEOUT_S: Final = 20.0
POLL_INTERVAL_S: Final = 0.05  # between two scans of the process table, never a fixed wait
TREE: Final = ["sh", "-c", "sleep 300 & sleep 300"]  # a shell with two children
STUBBORN_TREE: Final = ["sh", "-c", "trap '' TERM; sleep 300 & sleep 300"]
LONG: Final = ["sleep", "300"]
NOT_FOUND: Final = -32001
AMBIGUOUS: Final = -32006


# --- helpers ---------------------------------------------------------------------------


async def spawn_running(server: ServerProcess, command: list[str]) -> str:
    """Start a background run and return its id once its child runs."""
    run = await result_of(server, "spawn", {"command": command})
    run_id: str = run["runId"]
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while run["children"][0]["status"] != "running":
            assert run["status"] in ("queued", "running"), run
            run = await result_of(server, "status", {"runId": run_id})
    return run_id


async def wait_for_processes(run_id: str, count: int) -> None:
    """Wait (bounded) until at least `count` processes carry the run's marker."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:  # nothing to await: the processes are not ours to be told about
            if len(await asyncio.to_thread(marked_processes, {run_id})) >= count:
                return
            await asyncio.sleep(POLL_INTERVAL_S)


async def wait_until_no_run_survives(
    run_ids: set[str], timeout_s: float = LEFTOVER_TIMEOUT_S
) -> None:
    """Wait (bounded) until no process of these runs is alive; kill and fail otherwise.

    Another server ends them: each process found is waited for on its pidfd, then the
    table is read again for any that started meanwhile."""
    try:
        async with asyncio.timeout(timeout_s):
            while processes := await asyncio.to_thread(marked_processes, run_ids):
                await still_running(processes, timeout_s)
    except TimeoutError:
        pass
    assert_no_run_survives(run_ids)  # kills (by pid) and fails if any is still there


async def crash(server: ServerProcess, *, with_guardian: bool = False) -> set[str]:
    """SIGKILL the server; hand its runs over to the caller, whose job it is to check them.

    Its guardian ends their processes within moments (protocol.md §8.3); `with_guardian`
    kills the guardian too, so they are left for the next server to end."""
    if with_guardian:
        kill_with_its_guardian(server)
    else:
        server.signal(signal.SIGKILL)
    assert await asyncio.wait_for(server.proc.wait(), EXIT_TIMEOUT_S) == -signal.SIGKILL
    taken = set(server.run_ids)
    server.run_ids.clear()  # their processes outlive this server until another ends them
    return taken


def integrity(state_dir: Path) -> str:
    db = sqlite3.connect(state_dir / DB_NAME)
    try:
        result: str = db.execute("PRAGMA integrity_check").fetchone()[0]
        return result
    finally:
        db.close()


def forge_run_sharing_prefix(state_dir: Path, run_id: str, forged_id: str) -> None:
    """Copy the `runs` row of `run_id` under `forged_id` (no server may be running)."""
    db = sqlite3.connect(state_dir / DB_NAME, isolation_level=None)
    try:
        row = db.execute(
            "SELECT session_id, instance_id, kind, status, created_at, ended_at, label,"
            " last_seq, record FROM runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        assert row is not None, run_id
        record = json.loads(row[-1])
        assert record["run_id"] == run_id, record
        record["run_id"] = forged_id
        db.execute(
            "INSERT INTO runs (run_id, session_id, instance_id, kind, status, created_at,"
            " ended_at, label, last_seq, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (forged_id, *row[:-1], json.dumps(record)),
        )
    finally:
        db.close()


def assert_gapless(events: list[dict[str, Any]], last_seq: int) -> None:
    assert [event["seq"] for event in events] == list(range(1, last_seq + 1)), events


# --- tests -----------------------------------------------------------------------------


async def test_twenty_sigkilled_servers_leave_a_sound_database_and_interrupted_runs(
    tmp_path: Path,
) -> None:
    # The crash-safety check: SIGKILL the server 20 times on one state
    # directory while a run's process tree is alive. After every crash the
    # SQLite file must pass `PRAGMA integrity_check`; afterwards every run is
    # `interrupted` (with a reason), none is left queued/running, and the
    # restarted servers have ended every process those runs left behind.
    crashed: list[str] = []
    for _ in range(20):
        async with running_server(*state_args(tmp_path)) as server:
            run_id = await spawn_running(server, TREE)
            await wait_for_processes(run_id, 2)  # the shell's tree exists
            # This server recovered the previous crash's run: its tree must go.
            await wait_until_no_run_survives(set(crashed))
            taken = await crash(server)
            assert run_id in taken
            crashed.append(run_id)
        assert await asyncio.to_thread(integrity, tmp_path) == "ok"

    async with running_server(*state_args(tmp_path)) as server:
        listing = await result_of(server, "status", {})
        listed = {run["runId"]: run["status"] for run in listing["runs"]}
        assert set(listed) == set(crashed), listing
        assert set(listed.values()) == {"interrupted"}, listing  # none queued or running
        for run_id in crashed:
            snapshot = await result_of(server, "status", {"runId": run_id})
            assert snapshot["status"] == "interrupted" and snapshot["reason"], snapshot
            assert all(child["status"] in TERMINAL for child in snapshot["children"]), snapshot
        await wait_until_no_run_survives(set(crashed))
        assert (await server.finish())[0] == 0
    assert await asyncio.to_thread(integrity, tmp_path) == "ok"


async def test_a_crashed_servers_run_is_marked_interrupted_exactly_once_across_restarts(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path)) as first:
        run_id = await spawn_running(first, TREE)
        await wait_for_processes(run_id, 2)
        crashed = await crash(first)

    async with running_server(*state_args(tmp_path)) as second:
        assert (await result_of(second, "ping", {}))["pong"] is True  # recovery is done
        async with running_server(*state_args(tmp_path)) as third:
            assert (await result_of(third, "ping", {}))["pong"] is True
            for server in (second, third):
                snapshot = await result_of(server, "status", {"runId": run_id, "since": 0})
                assert snapshot["status"] == "interrupted" and snapshot["reason"], snapshot
                events = snapshot["events"]
                assert_gapless(events, snapshot["lastSeq"])
                interrupted = [
                    event
                    for event in events
                    if event["type"] == "status" and event["status"] == "interrupted"
                ]
                assert len(interrupted) == 1, events
                assert events[-1] == interrupted[0], events
            await wait_until_no_run_survives(crashed)
            assert (await third.finish())[0] == 0
        assert (await second.finish())[0] == 0
    # Told once, by the server that found it, its count and noun in agreement.
    told = "marked 1 run of an ended server process interrupted"
    assert (told in second.stderr_text, told in third.stderr_text) == (True, False)

    async with running_server(*state_args(tmp_path)) as fourth:  # after both ended normally
        snapshot = await result_of(fourth, "status", {"runId": run_id, "since": 0})
        statuses = [event["status"] for event in snapshot["events"] if event["type"] == "status"]
        assert statuses.count("interrupted") == 1, snapshot["events"]
        assert (await fourth.finish())[0] == 0


async def test_a_second_live_server_sees_anothers_run_and_stops_it_only_through_its_owner(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path)) as owner:
        run_id = await spawn_running(owner, LONG)
        async with running_server(*state_args(tmp_path)) as other:
            seen = await result_of(other, "status", {"runId": run_id})
            assert seen["status"] == "running" and seen["children"][0]["status"] == "running"
            listing = await result_of(other, "status", {})
            assert [(r["runId"], r["status"]) for r in listing["runs"]] == [(run_id, "running")]
            # The owner's control socket out of reach: the stop is refused, nothing changes.
            with StateBrowser.open(tmp_path) as browser:
                found = browser.owner(run_id)
            assert found is not None
            sock = socket_path(tmp_path, found.instance_id)
            aside = sock.rename(sock.with_name("aside"))
            refused = await error_of(other, "stop", {"runId": run_id})
            assert refused["code"] == NOT_FOUND, refused
            assert refused["data"]["reason"] == "owned-by-another-server", refused
            assert (await result_of(owner, "status", {"runId": run_id}))["status"] == "running"
            aside.rename(sock)

            stop = {"runId": run_id, "graceMs": 1000, "reason": "stopped next door"}
            stopped = await result_of(other, "stop", stop)
            assert stopped["status"] == "cancelled" and stopped["alreadyTerminal"] is False
            assert stopped["reason"] == "stopped next door"
            after = await result_of(owner, "status", {"runId": run_id})
            assert after["status"] == "cancelled" and after["reason"] == "stopped next door"
            again = await result_of(other, "stop", {"runId": run_id})
            assert again["status"] == "cancelled" and again["alreadyTerminal"] is True
            assert (await other.finish())[0] == 0
        final = await result_of(owner, "status", {"runId": run_id, "since": 0})
        statuses = [event["status"] for event in final["events"] if event["type"] == "status"]
        assert statuses == ["queued", "running", "cancelled"], final["events"]
        assert (await owner.finish())[0] == 0


async def test_a_stop_of_a_run_whose_server_died_since_says_the_server_is_gone(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path)) as owner:
        run_id = await spawn_running(owner, TREE)
        async with running_server(*state_args(tmp_path)) as other:
            assert (await result_of(other, "ping", {}))["pong"] is True  # started: owner alive
            crashed = await crash(owner)
            refused = await error_of(other, "stop", {"runId": run_id})
            assert refused["code"] == NOT_FOUND, refused
            assert refused["data"]["reason"] == "server-gone", refused
            assert "marks it interrupted" in refused["message"]
            other.run_ids.clear()  # the third server's to end, not this one's
            assert (await other.finish())[0] == 0
    async with running_server(*state_args(tmp_path)) as third:  # ends what the dead one left
        snapshot = await result_of(third, "status", {"runId": run_id})
        assert snapshot["status"] == "interrupted"
        await wait_until_no_run_survives(crashed)
        assert (await third.finish())[0] == 0


async def test_a_finished_run_is_listed_by_a_later_server_of_its_session_only(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path, "s1")) as first:
        spawn = {"command": ["sh", "-c", "echo kept; echo across"], "mode": "task"}
        done = await result_of(first, "spawn", spawn)
        assert done["status"] == "completed" and done["output"]["text"] == "kept\nacross\n"
        run_id = done["runId"]
        assert (await first.finish())[0] == 0

    async with running_server(*state_args(tmp_path, "s1")) as second:
        listing = await result_of(second, "status", {})
        assert [(r["runId"], r["status"], r["kind"]) for r in listing["runs"]] == [
            (run_id, "completed", "single")
        ]
        again = await result_of(second, "status", {"runId": run_id})
        assert again["status"] == "completed"
        assert again["output"] == done["output"]
        assert again["children"][0]["exitCode"] == 0
        replay = await result_of(second, "status", {"runId": run_id, "since": 0})
        assert_gapless(replay["events"], replay["lastSeq"])
        assert replay["events"][-1]["status"] == "completed"
        assert (await second.finish())[0] == 0

    async with running_server(*state_args(tmp_path, "s2")) as stranger:
        assert (await result_of(stranger, "status", {}))["runs"] == []
        for params in ({"runId": run_id}, {"runId": run_id[:8]}, {"runId": run_id, "since": 0}):
            assert (await error_of(stranger, "status", params))["code"] == NOT_FOUND
        assert (await error_of(stranger, "stop", {"runId": run_id}))["code"] == NOT_FOUND
        assert (await stranger.finish())[0] == 0


async def test_a_run_pruned_from_history_is_not_found_on_the_server_that_ran_it(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path, "s1", "--history-limit", "2")) as server:
        run_ids = []
        for n in range(3):
            spawn = {"command": ["echo", str(n)], "mode": "background"}
            run_id = (await result_of(server, "spawn", spawn))["runId"]
            run_ids.append(run_id)
            async with asyncio.timeout(EXIT_TIMEOUT_S):
                while True:  # a background run says nothing unasked: poll it, bounded
                    status = await result_of(server, "status", {"runId": run_id})
                    if status["status"] in TERMINAL:
                        break
                    await asyncio.sleep(POLL_INTERVAL_S)
        # The third spawn's reply came after the write that pruned the first run.
        for params in ({"runId": run_ids[0]}, {"runId": run_ids[0], "since": 0}):
            error = await error_of(server, "status", params)
            assert error["code"] == NOT_FOUND, (params, error)
        assert (await error_of(server, "stop", {"runId": run_ids[0]}))["code"] == NOT_FOUND
        listing = await result_of(server, "status", {})
        assert [r["runId"] for r in listing["runs"]] == run_ids[:0:-1]
        for run_id in run_ids[1:]:
            assert (await result_of(server, "status", {"runId": run_id}))["status"] == "completed"
        assert (await server.finish())[0] == 0


def query(state_dir: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """Read (or change, while no server writes) the state directory's database."""
    db = sqlite3.connect(state_dir / DB_NAME, isolation_level=None)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


async def test_servers_with_default_sessions_leave_no_idle_session_or_ended_server_behind(
    tmp_path: Path,
) -> None:
    args = ("--state-dir", str(tmp_path))  # no --session: each server makes its own
    for n in range(3):
        async with running_server(*args) as server:
            done = await result_of(server, "spawn", {"command": ["echo", str(n)], "mode": "task"})
            assert done["status"] == "completed"
            assert (await server.finish())[0] == 0
    # Each start deleted the records of the servers that had ended before it.
    assert await asyncio.to_thread(query, tmp_path, "SELECT count(*) FROM instances") == [(1,)]
    sessions = "SELECT count(DISTINCT session_id) FROM runs"
    assert await asyncio.to_thread(query, tmp_path, sessions) == [(3,)]  # recent: all kept
    month_ago = (datetime.now(UTC) - timedelta(days=31)).isoformat()
    await asyncio.to_thread(
        query, tmp_path, "UPDATE runs SET created_at = ?, ended_at = ?", month_ago, month_ago
    )

    async with running_server(*args) as server:
        assert (await result_of(server, "status", {}))["runs"] == []
        assert await asyncio.to_thread(query, tmp_path, sessions) == [(0,)]
        for table in ("runs", "attempts", "events"):
            count = await asyncio.to_thread(query, tmp_path, f"SELECT count(*) FROM {table}")
            assert count == [(0,)], table
        instances = await asyncio.to_thread(query, tmp_path, "SELECT ended_at FROM instances")
        assert instances == [(None,)]  # this live server's own, and nothing else
        assert (await server.finish())[0] == 0


async def test_another_sessions_run_is_not_found_on_a_shared_state_dir(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path, "s1")) as mine:
        run_id = await spawn_running(mine, LONG)
        async with running_server(*state_args(tmp_path, "s2")) as theirs:
            unknown = await error_of(theirs, "status", {"runId": "f" * 32})
            for method, params in (
                ("status", {"runId": run_id}),
                ("status", {"runId": run_id[:8]}),
                ("status", {"runId": run_id, "since": 0}),
                ("stop", {"runId": run_id}),
                ("stop", {"runId": run_id[:8]}),
            ):
                error = await error_of(theirs, method, params)
                assert error["code"] == NOT_FOUND, (method, params, error)
                # Indistinguishable from a run that does not exist: nothing leaks.
                assert error["data"].keys() == unknown["data"].keys(), error
            assert (await result_of(theirs, "status", {}))["runs"] == []
            own = await spawn_running(theirs, LONG)
            assert [r["runId"] for r in (await result_of(mine, "status", {}))["runs"]] == [run_id]
            assert (await error_of(mine, "status", {"runId": own}))["code"] == NOT_FOUND
            assert (await error_of(theirs, "stop", {"runId": run_id}))["code"] == NOT_FOUND
            stopped = await result_of(theirs, "stop", {"runId": own, "graceMs": 1000})
            assert stopped["status"] == "cancelled"  # a refused stop harms nothing of its own
            # The refusals named s1's run (and a made-up id): it is not this server's to
            # account for at its exit; `mine` does, and it still runs.
            theirs.run_ids.intersection_update({own})
            assert (await theirs.finish())[0] == 0

        # Rebinding one connection with ping: the run follows its session, not the connection.
        assert (await result_of(mine, "ping", {"sessionId": "s2"}))["sessionId"] == "s2"
        assert (await error_of(mine, "status", {"runId": run_id}))["code"] == NOT_FOUND
        assert (await error_of(mine, "stop", {"runId": run_id}))["code"] == NOT_FOUND
        assert [r["runId"] for r in (await result_of(mine, "status", {}))["runs"]] == [own]
        assert (await result_of(mine, "ping", {"sessionId": "s1"}))["sessionId"] == "s1"
        assert (await result_of(mine, "status", {"runId": run_id}))["status"] == "running"
        stopped = await result_of(mine, "stop", {"runId": run_id, "graceMs": 1000})
        assert stopped["status"] == "cancelled"
        assert (await mine.finish())[0] == 0


async def test_run_id_prefixes_resolve_from_eight_characters_and_ambiguity_is_an_error(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path)) as first:
        done = await result_of(first, "spawn", {"command": ["echo", "one"], "mode": "task"})
        run_id = done["runId"]
        for length in (8, 12, len(run_id)):
            found = await result_of(first, "status", {"runId": run_id[:length]})
            assert found["runId"] == run_id and found["status"] == "completed"
        for length in (1, 7):
            short = await error_of(first, "status", {"runId": run_id[:length]})
            assert short["code"] == NOT_FOUND, short
            assert short["message"].endswith("(a run id prefix needs at least 8 characters)")
        unknown = await error_of(first, "status", {"runId": "f" * 8})
        assert unknown["message"] == f"no run {'f' * 8!r} in this session", unknown
        assert (await first.finish())[0] == 0

    # A second run sharing the first 8 characters, copied into the history while
    # no server runs (waiting for uuid4 to collide on 32 bits is impractical).
    twin = run_id[:8] + ("0" if run_id[8] != "0" else "1") + run_id[9:]
    await asyncio.to_thread(forge_run_sharing_prefix, tmp_path, run_id, twin)
    assert await asyncio.to_thread(integrity, tmp_path) == "ok"

    async with running_server(*state_args(tmp_path)) as second:
        for method in ("status", "stop"):
            ambiguous = await error_of(second, method, {"runId": run_id[:8]})
            assert ambiguous["code"] == AMBIGUOUS, ambiguous
            assert sorted(ambiguous["data"]["matches"]) == sorted([run_id, twin]), ambiguous
        for given, expected in ((run_id[:9], run_id), (twin[:9], twin), (run_id, run_id)):
            found = await result_of(second, "status", {"runId": given})
            assert found["runId"] == expected and found["status"] == "completed"
        assert (await error_of(second, "status", {"runId": run_id[:7]}))["code"] == NOT_FOUND
        assert (await second.finish())[0] == 0


async def test_leftovers_are_ended_even_if_the_server_recovering_them_dies_too(
    tmp_path: Path,
) -> None:
    # The crash loop above waits for each restart to end the previous leftovers
    # before killing it. Here the recovering server is killed while it still
    # waits out the grace of a tree that ignores SIGTERM (the ignored signal is
    # inherited by the sleeps), so the next server must finish the job.
    async with running_server(*state_args(tmp_path)) as first:
        run_id = await spawn_running(first, STUBBORN_TREE)
        await wait_for_processes(run_id, 3)
        crashed = await crash(first)
    async with running_server(*state_args(tmp_path), "--grace-ms", "60000") as second:
        assert (await result_of(second, "ping", {}))["pong"] is True  # recovery has begun
        crashed |= await crash(second)  # still in the 60 s grace: the tree is alive
    async with running_server(*state_args(tmp_path), "--grace-ms", "500") as third:
        snapshot = await result_of(third, "status", {"runId": run_id})
        assert snapshot["status"] == "interrupted", snapshot
        await wait_until_no_run_survives(crashed, timeout_s=5.0)
        assert (await third.finish())[0] == 0


# Not written: history pruning across restarts (protocol.md §13, 100 runs per session)
# cannot be configured from the command line yet, and 100+ runs per test is too slow.


UNRECORDABLE_SERVER: Final = (
    sys.executable,
    str(Path(__file__).resolve().parent.parent / "fakes" / "unrecordable_server.py"),
)


async def test_a_run_the_store_cannot_write_is_an_error_reply_and_its_child_is_ended(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "child.pid"
    doomed = {
        "command": ["sh", "-c", f'echo $$ > "{pid_file}"; exec sleep 1000'],
        "label": "unrecordable",
    }
    kept = {"command": ["sleep", "1000"], "label": "kept"}
    async with running_server(*state_args(tmp_path), program=UNRECORDABLE_SERVER) as server:
        # One batch: both runs are launched in one turn and written in one transaction.
        await server.send(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "spawn", "params": doomed},
                {"jsonrpc": "2.0", "id": 2, "method": "spawn", "params": kept},
            ]
        )
        answers = await server.receive()
        while not isinstance(answers, list):  # run/event notifications come first
            answers = await server.receive()
        failed, accepted = sorted(answers, key=lambda reply: reply["id"])
        assert failed["error"]["code"] == -32603, failed
        assert failed["error"]["message"].endswith("could not be written to the run history")
        assert "Traceback" not in json.dumps(failed)
        doomed_id = failed["error"]["data"]["runId"]
        # The child had started (it wrote its pid) and is gone now, reaped.
        assert not psutil.pid_exists(int(pid_file.read_text()))
        assert await asyncio.to_thread(marked_processes, {doomed_id}) == []
        # The other run of the same write was written alone, and goes on.
        assert accepted["result"]["status"] == "running"
        listed = (await result_of(server, "status", {}))["runs"]
        assert [run["label"] for run in listed] == ["kept"]
        await result_of(server, "stop", {"runId": accepted["result"]["runId"], "graceMs": 0})
        assert (await server.finish())[0] == 0
    assert "could not be written to the run history" in server.stderr_text
    async with running_server(*state_args(tmp_path)) as later:
        listed = (await result_of(later, "status", {}))["runs"]
        assert [(run["label"], run["status"]) for run in listed] == [("kept", "cancelled")]
        error = await error_of(later, "status", {"runId": doomed_id})
        assert error["code"] == NOT_FOUND


async def test_a_task_run_that_ends_at_once_costs_one_committed_transaction(
    tmp_path: Path,
) -> None:
    # Its creation, its child's start and its end are one write: the run is held
    # off the disk until it ends (within its first moments), its id reserved on
    # disk beforehand so that a crash meanwhile still leaves its children found.
    wal = tmp_path / WAL_NAME
    async with running_server(*state_args(tmp_path)) as server:
        await result_of(server, "ping", {})
        for _ in range(3):
            before = committed_transactions(wal)
            run = await result_of(server, "spawn", {"command": ["true"], "mode": "task"})
            assert run["status"] == "completed", run
            assert committed_transactions(wal) - before == 1
        listing = await result_of(server, "status", {})
        assert len(listing["runs"]) == 3, listing
        assert (await server.finish())[0] == 0


async def test_a_task_runs_tree_is_ended_by_the_next_server_when_its_server_dies_at_once(
    tmp_path: Path,
) -> None:
    # Killed while the run may still be held off the disk: the next server finds
    # the tree by the run's marker, whose id the dead server had reserved on disk.
    # Marker tracking, so that no cgroup sweep ends the tree in its place.
    args = state_args(tmp_path, "s1", "--process-tracking", "marker")
    async with running_server(*args) as first:
        await first.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "spawn",
                "params": {"command": TREE, "mode": "task"},
            }
        )
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while True:
                message = await first.receive()
                params = message.get("params", {})
                if params.get("type") == "child" and params.get("status") == "running":
                    break
        run_id = params["runId"]
        crashed = await crash(first, with_guardian=True)
        assert run_id in crashed
    await wait_for_processes(run_id, 1)  # the tree outlived its server and its guardian

    async with running_server(*args) as second:
        assert (await result_of(second, "ping", {}))["pong"] is True
        await wait_until_no_run_survives({run_id})
        assert (await second.finish())[0] == 0
