"""Protected resume over real stdio: `preflight {resume}` approves, `resume {token}` runs it once.

A resume token is bound to its session, run, child, contract digest and
follow-up message; it expires and is consumed exactly once. Every refusal is
`-32004` with `data.reason`, and then nothing is started: the run list, the
run's `lastSeq` and its children's attempts stay as they were, and no process
carries the run's marker (protocol.md §15, §4). Stored launch projections that were
changed, are missing or are of another version are refused, never trusted.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import pytest

from subagent_host.planning.fingerprint import fingerprint
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    TERMINAL,
    ServerProcess,
    error_of,
    marked_processes,
    reply_to,
    result_of,
    running_server,
    state_args,
)
from tests.e2e.test_durability import (
    POLL_INTERVAL_S,
    STUBBORN_TREE,
    crash,
    spawn_running,
    wait_for_processes,
    wait_until_no_run_survives,
)
from tests.e2e.test_preflight import (
    FINGERPRINT,
    SHORTEST_TTL_MS,
    error_codes,
    parse_time,
    run_list,
    wait_until_past,
)

DB_NAME: Final = "subagent-host.sqlite3"
RUN_MARKER: Final = "SUBAGENT_HOST_RUN_ID"
NOT_FOUND: Final = -32001
RESUME_DENIED: Final = -32004
AMBIGUOUS: Final = -32006
DENIAL_REASONS: Final = frozenset(
    {"unknown-token", "expired", "consumed", "wrong-session", "mismatch", "not-resumable",
     "override-not-allowed", "launch-changed"}
)  # fmt: skip
# Echoes its stdin, then fails: a resume shows what the new attempt read.
ECHO_AND_FAIL: Final = ["sh", "-c", "cat; exit 3"]
# Fails at once, whatever its stdin holds.
FAIL: Final = ["sh", "-c", "exit 3"]
# Sleeps (until a limit ends it) only when its stdin says "slow".
SLOW_ON_REQUEST: Final = ["sh", "-c", "if grep -q slow; then sleep 300; fi; exit 3"]
# What a tampered projection would run: a process the scan for the run marker would find.
TAMPERED_ARGV: Final = ["sh", "-c", "echo tampered; sleep 300"]


# --- helpers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Observed:
    """What a started attempt would change."""

    runs: list[dict[str, Any]]
    status: str
    last_seq: int
    attempts: list[tuple[int, int, str]]


async def observe(server: ServerProcess, run_id: str) -> Observed:
    snapshot = await result_of(server, "status", {"runId": run_id})
    return Observed(
        runs=await run_list(server),
        status=snapshot["status"],
        last_seq=snapshot["lastSeq"],
        attempts=[(c["index"], c["attempt"], c["status"]) for c in snapshot["children"]],
    )


async def assert_nothing_started(server: ServerProcess, run_id: str, before: Observed) -> None:
    """No new run, no new attempt, no new event, and no process of the run."""
    assert await observe(server, run_id) == before
    assert await asyncio.to_thread(marked_processes, {run_id}) == []


async def denied(server: ServerProcess, token: str, mode: str = "task") -> dict[str, Any]:
    """The -32004 error of a resume that must be refused."""
    error = await error_of(server, "resume", {"token": token, "mode": mode})
    assert error["code"] == RESUME_DENIED, error
    assert error["data"]["reason"] in DENIAL_REASONS, error
    return error


async def failed_run(server: ServerProcess, spawn: dict[str, Any]) -> dict[str, Any]:
    """Run to its end (task mode); it must fail."""
    run = await result_of(server, "spawn", {**spawn, "mode": "task"})
    assert run["status"] == "failed", run
    return run


async def approve(server: ServerProcess, resume: dict[str, Any]) -> dict[str, Any]:
    """An accepted `preflight {resume}`."""
    result = await result_of(server, "preflight", {"resume": resume})
    assert result["accepted"] is True, result
    assert isinstance(result["token"], str) and result["token"], result
    return result


async def refused(server: ServerProcess, resume: dict[str, Any], code: str) -> dict[str, Any]:
    """A `preflight {resume}` answered `accepted: false` with this error code and no token."""
    reply = await reply_to(server, "preflight", {"resume": resume})
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    assert result["accepted"] is False, result
    assert code in error_codes(result), result
    assert "token" not in result and "contract" not in result, result
    return result


def resume_of(run_ref: str, message: str = "x", **extra: Any) -> dict[str, Any]:
    """`preflight` params approving a resume."""
    return {"resume": {"runId": run_ref, "message": message, **extra}}


def digest_of(text: str) -> str:
    return "sha256:v1:" + hashlib.sha256(text.encode()).hexdigest()


def open_db(state: Path) -> sqlite3.Connection:
    """The state database, for a test to read or change (only while no server writes)."""
    return sqlite3.connect(state / DB_NAME, isolation_level=None)


def change_projection(
    state: Path, run_id: str, index: int, change: Callable[[dict[str, Any]], None], reseal: bool
) -> None:
    """Rewrite a child's stored projection; with `reseal`, its digest to match."""
    db = open_db(state)
    try:
        (stored,) = db.execute(
            "SELECT projection FROM children WHERE run_id = ? AND idx = ?", (run_id, index)
        ).fetchone()
        projection = json.loads(stored)
        change(projection)
        db.execute(
            "UPDATE children SET projection = ? WHERE run_id = ? AND idx = ?",
            (json.dumps(projection, sort_keys=True, separators=(",", ":")), run_id, index),
        )
        if reseal:
            db.execute(
                "UPDATE children SET projection_digest = ? WHERE run_id = ? AND idx = ?",
                (fingerprint(projection), run_id, index),
            )
    finally:
        db.close()


def execute(state: Path, sql: str, *args: object) -> int:
    db = open_db(state)
    try:
        return db.execute(sql, args).rowcount
    finally:
        db.close()


def attempts_stored(state: Path, run_id: str) -> list[tuple[int, int]]:
    db = open_db(state)
    try:
        rows = db.execute(
            "SELECT idx, attempt FROM attempts WHERE run_id = ? ORDER BY idx, attempt", (run_id,)
        ).fetchall()
        return [(idx, attempt) for idx, attempt in rows]
    finally:
        db.close()


def forge_twin(state: Path, run_id: str, twin_id: str) -> None:
    """Copy a run (its row, attempts, children and events) under another id."""
    db = open_db(state)
    try:
        db.execute("BEGIN IMMEDIATE")
        for table in ("runs", "attempts", "children", "events"):
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
            rows = db.execute(f"SELECT * FROM {table} WHERE run_id = ?", (run_id,)).fetchall()
            assert rows or table == "events", table
            for row in rows:
                copied = [
                    twin_id
                    if name == "run_id"
                    else value.replace(run_id, twin_id)
                    if isinstance(value, str)
                    else value
                    for name, value in zip(columns, row, strict=True)
                ]
                db.execute(
                    f"INSERT INTO {table} ({', '.join(columns)})"
                    f" VALUES ({', '.join('?' for _ in columns)})",
                    copied,
                )
        db.execute("COMMIT")
    finally:
        db.close()


async def resume_both(
    server: ServerProcess, *tokens: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Send one task-mode resume per token before reading any reply.

    Returns the replies (in request order) and the `run/event`s that came with them.
    """
    ids = []
    for token in tokens:
        server._next_id += 1
        ids.append(server._next_id)
        params = {"token": token, "mode": "task"}
        await server.send(
            {"jsonrpc": "2.0", "id": server._next_id, "method": "resume", "params": params}
        )
    replies: dict[int, dict[str, Any]] = {}
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while len(replies) < len(ids):
            message = await server.receive()
            if message.get("id") in ids:
                replies[message["id"]] = message
            elif message.get("method") == "run/event":
                events.append(message["params"])
    return [replies[msg_id] for msg_id in ids], events


# --- resumes that run ------------------------------------------------------------------


async def test_a_failed_single_run_resumes_as_attempt_2_reading_its_output_and_the_follow_up(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        run = await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": "hi"})
        run_id = run["runId"]
        assert run["children"][0]["attempt"] == 1 and run["output"]["text"] == "hi"

        approval = await approve(server, {"runId": run_id[:8], "message": "and more"})
        assert approval["diagnostics"] == []
        contract = approval["contract"]
        assert (contract["runId"], contract["index"], contract["attempt"]) == (run_id, 0, 2)
        assert contract["projection"]["argvTemplate"] == ECHO_AND_FAIL
        assert contract["projection"]["backend"] == "command"
        assert FINGERPRINT.fullmatch(approval["contractDigest"]), approval
        assert approval["contractDigest"] == fingerprint(contract)
        assert approval["followUpDigest"] == digest_of("and more")
        assert parse_time(approval["expiresAt"]) > datetime.now(UTC)
        assert approval["token"] not in json.dumps(contract)
        assert await asyncio.to_thread(marked_processes, {run_id}) == []  # preflight starts nothing

        resumed = await result_of(server, "resume", {"token": approval["token"], "mode": "task"})
        assert resumed["runId"] == run_id and resumed["status"] == "failed", resumed
        child = resumed["children"][0]
        assert child["attempt"] == 2 and child["exitCode"] == 3, child
        assert child["output"]["text"] == "hi\nand more", child  # prior output, newline, message
        assert resumed["fingerprint"] == run["fingerprint"]

        again = await result_of(server, "status", {"runId": run_id})
        assert again["children"][0]["attempt"] == 2
        runs = await run_list(server)
        assert [r["runId"] for r in runs] == [run_id]  # the same run, not a new one
        await server.finish()


async def test_a_parallel_run_resumes_only_its_failed_child(tmp_path: Path) -> None:
    tasks = [{"command": ["echo", "fine"]}, {"command": ECHO_AND_FAIL, "prompt": "hi"}]
    async with running_server(*state_args(tmp_path / "state")) as server:
        run = await failed_run(server, {"tasks": tasks})
        run_id = run["runId"]
        assert [c["status"] for c in run["children"]] == ["completed", "failed"]

        by_default = await approve(server, {"runId": run_id, "message": "again"})
        assert by_default["contract"]["index"] == 1  # the first child that did not complete
        approval = await approve(server, {"runId": run_id, "index": 1, "message": "again"})
        assert approval["contractDigest"] == by_default["contractDigest"]

        resumed = await result_of(server, "resume", {"token": approval["token"], "mode": "task"})
        first, second = resumed["children"]
        assert (first["attempt"], first["status"]) == (1, "completed"), first
        assert first["output"]["text"] == "fine\n"
        assert second["attempt"] == 2 and second["output"]["text"] == "hi\nagain", second
        await server.finish()


async def test_a_chain_resumes_its_failed_first_item(tmp_path: Path) -> None:
    chain = [
        {"command": ECHO_AND_FAIL, "prompt": "hi"},
        {"command": ["cat"], "prompt": "{previous}"},
    ]
    async with running_server(*state_args(tmp_path / "state")) as server:
        run = await failed_run(server, {"chain": chain})
        run_id = run["runId"]
        assert run["children"][0]["status"] == "failed"
        assert run["children"][1]["status"] != "completed"

        approval = await approve(server, {"runId": run_id, "index": 0, "message": "next"})
        assert approval["contract"]["index"] == 0
        resumed = await result_of(server, "resume", {"token": approval["token"], "mode": "task"})
        first, second = resumed["children"]
        assert first["attempt"] == 2 and first["output"]["text"] == "hi\nnext", first
        assert second["attempt"] == 1, second
        await server.finish()


async def test_a_token_outlives_its_server_and_resumes_in_the_background(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        run_id = (await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": "hi"}))["runId"]
        token = (await approve(server, {"runId": run_id, "message": "after restart"}))["token"]
        await server.finish()
    async with running_server(*state_args(state)) as server:
        started = await result_of(server, "resume", {"token": token, "mode": "background"})
        assert started["runId"] == run_id and started["children"][0]["attempt"] == 2, started
        snapshot = started
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while snapshot["status"] not in TERMINAL:
                snapshot = await result_of(server, "status", {"runId": run_id})
        child = snapshot["children"][0]
        assert (snapshot["status"], child["attempt"]) == ("failed", 2), snapshot
        assert child["output"]["text"] == "hi\nafter restart", child  # the prior text, from disk
        await server.finish()
    assert await asyncio.to_thread(attempts_stored, state, run_id) == [(0, 1), (0, 2)]


async def test_a_resume_without_mode_answers_in_the_mode_its_spawn_used(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        waited = (await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": "hi"}))["runId"]
        spawned = await result_of(
            server, "spawn", {"command": SLOW_ON_REQUEST, "prompt": "quick", "mode": "background"}
        )
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while spawned["status"] not in TERMINAL:
                spawned = await result_of(server, "status", {"runId": spawned["runId"]})
        tokens = [
            (await approve(server, {"runId": waited, "message": "task again"}))["token"],
            (await approve(server, {"runId": spawned["runId"], "message": "slow"}))["token"],
        ]
        await server.finish()
    async with running_server(*state_args(state)) as server:  # the mode is kept on disk
        resumed = await result_of(server, "resume", {"token": tokens[0]})
        assert resumed["status"] == "failed", resumed  # answered at its end, as its spawn was
        assert resumed["children"][0]["output"]["text"] == "hi\ntask again", resumed
        started = await result_of(server, "resume", {"token": tokens[1]})
        assert started["status"] in ("queued", "running"), started  # answered at once
        assert started["children"][0]["attempt"] == 2, started
        stopped = await result_of(server, "stop", {"runId": spawned["runId"], "graceMs": 1000})
        assert stopped["status"] == "cancelled", stopped
        await server.finish()


async def test_an_interactive_childs_resume_runs_in_the_background_only(tmp_path: Path) -> None:
    """`mode: "task"` would wait until the child is closed: -32602 naming `mode`, and the
    token is not spent; without a mode the resume answers at once."""
    async with running_server(*state_args(tmp_path / "state")) as server:
        spawned = await result_of(server, "spawn", {"command": FAIL, "interactive": True})
        run_id = spawned["runId"]
        assert spawned["status"] in ("queued", "running"), spawned  # answered at once
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while spawned["status"] not in TERMINAL:
                spawned = await result_of(server, "status", {"runId": run_id})
        approval = await approve(server, {"runId": run_id, "message": "again"})
        assert approval["contract"]["projection"]["interactive"] is True
        error = await error_of(server, "resume", {"token": approval["token"], "mode": "task"})
        assert error["code"] == -32602 and error["data"]["errors"][0]["path"] == "mode", error
        started = await result_of(server, "resume", {"token": approval["token"]})
        assert started["children"][0]["attempt"] == 2, started
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while started["status"] not in TERMINAL:
                started = await result_of(server, "status", {"runId": run_id})
        await server.finish()


# --- tokens: single use, in time, in their session -------------------------------------


async def test_a_token_is_consumed_once_even_by_two_concurrent_resumes(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        run_id = (await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": "hi"}))["runId"]
        token = (await approve(server, {"runId": run_id, "message": "once"}))["token"]
        stale = (await approve(server, {"runId": run_id, "message": "once"}))["token"]

        replies, _ = await resume_both(server, token, token)
        won = [reply for reply in replies if "result" in reply]
        lost = [reply for reply in replies if "error" in reply]
        assert len(won) == 1 and len(lost) == 1, replies
        assert won[0]["result"]["children"][0]["attempt"] == 2
        assert lost[0]["error"]["code"] == RESUME_DENIED
        assert lost[0]["error"]["data"]["reason"] == "consumed", lost

        before = await observe(server, run_id)
        assert before.attempts == [(0, 2, "failed")]
        replay = await denied(server, token)
        assert replay["data"]["reason"] == "consumed"
        # Approved for attempt 2, which has run: what it would resume is no longer that.
        outdated = await denied(server, stale)
        assert outdated["data"]["reason"] == "mismatch", outdated
        await assert_nothing_started(server, run_id, before)
        await server.finish()


@pytest.mark.parametrize(
    "restart",
    [False, True],
    ids=["same-server", "after-restart"],
)
async def test_two_tokens_for_one_child_start_one_attempt(tmp_path: Path, restart: bool) -> None:
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        run_id = (await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": "hi"}))["runId"]
        first = (await approve(server, {"runId": run_id, "message": "one"}))["token"]
        second = (await approve(server, {"runId": run_id, "message": "two"}))["token"]
        if not restart:
            replies, events = await resume_both(server, first, second)
        await server.finish()
    if restart:
        async with running_server(*state_args(state)) as server:
            replies, events = await resume_both(server, first, second)
            await server.finish()
    won = [reply for reply in replies if "result" in reply]
    lost = [reply["error"] for reply in replies if "error" in reply]
    assert len(won) == 1, replies  # each token is valid, but only one attempt 2 may start
    assert lost[0]["code"] == RESUME_DENIED
    assert lost[0]["data"]["reason"] in ("mismatch", "not-resumable"), lost
    seqs = [event["seq"] for event in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs  # one attempt's events
    assert await asyncio.to_thread(attempts_stored, state, run_id) == [(0, 1), (0, 2)]


async def test_an_expired_token_is_refused(tmp_path: Path) -> None:
    ttl = str(SHORTEST_TTL_MS)
    async with running_server(
        *state_args(tmp_path / "state", "s1", "--resume-token-ttl-ms", ttl)
    ) as server:
        run_id = (await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": "hi"}))["runId"]
        approval = await approve(server, {"runId": run_id, "message": "late"})
        await wait_until_past(approval["expiresAt"])
        before = await observe(server, run_id)
        expired = await denied(server, approval["token"])
        assert expired["data"]["reason"] == "expired"
        await assert_nothing_started(server, run_id, before)
        await server.finish()


async def test_unknown_tokens_are_refused(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        run_id = (await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": "hi"}))["runId"]
        token = (await approve(server, {"runId": run_id, "message": "m"}))["token"]
        before = await observe(server, run_id)
        for made_up in ("rt-no-such-token", token + "x", token[:-1], ""):
            error = await denied(server, made_up)
            assert error["data"]["reason"] == "unknown-token", (made_up, error)
        await assert_nothing_started(server, run_id, before)
        await server.finish()


async def test_a_token_and_a_run_of_another_session_are_foreign(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with running_server(*state_args(state, "s1")) as owner:
        run_id = (await failed_run(owner, {"command": ECHO_AND_FAIL, "prompt": "hi"}))["runId"]
        token = (await approve(owner, {"runId": run_id, "message": "mine"}))["token"]
        before = await observe(owner, run_id)
        async with running_server(*state_args(state, "s2")) as stranger:
            foreign = await denied(stranger, token)
            assert foreign["data"]["reason"] == "wrong-session"
            for run_ref in (run_id, run_id[:8]):
                error = await error_of(stranger, "preflight", resume_of(run_ref))
                assert error["code"] == NOT_FOUND, error
            assert await run_list(stranger) == []
            await stranger.finish()
        await assert_nothing_started(owner, run_id, before)
        # The foreign attempt did not use the token up.
        resumed = await result_of(owner, "resume", {"token": token, "mode": "task"})
        assert resumed["children"][0]["attempt"] == 2
        await owner.finish()


# --- which run, which child ------------------------------------------------------------


async def test_unknown_runs_short_prefixes_and_bad_indexes_are_refused(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        run_id = (await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": "hi"}))["runId"]
        other_prefix = ("0" if run_id[0] != "0" else "1") + run_id[1:]
        for run_ref in ("no-such-run-id", other_prefix, other_prefix[:8], run_id[:7], run_id + "0"):
            error = await error_of(server, "preflight", resume_of(run_ref))
            assert error["code"] == NOT_FOUND, (run_ref, error)

        both = await result_of(server, "preflight", {"command": ["true"], **resume_of(run_id)})
        assert both["accepted"] is False and error_codes(both) == ["invalid-shape"], both
        wrong = await refused(
            server, {"runId": run_id, "index": 5, "message": "x"}, "invalid-index"
        )
        assert wrong["diagnostics"][0]["path"] == "resume.index"
        assert wrong["diagnostics"][0]["message"].endswith(" has 1 child (index 0), not 5")
        await refused(server, {"runId": run_id, "index": 1, "message": "x"}, "invalid-index")
        assert (await observe(server, run_id)).attempts == [(0, 1, "failed")]
        await server.finish()


async def test_an_ambiguous_prefix_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        run_id = (await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": "hi"}))["runId"]
        await server.finish()
    twin_id = run_id[:8] + ("f" if run_id[8] != "f" else "e") + run_id[9:]
    await asyncio.to_thread(forge_twin, state, run_id, twin_id)
    async with running_server(*state_args(state)) as server:
        assert {r["runId"] for r in await run_list(server)} == {run_id, twin_id}
        error = await error_of(server, "preflight", resume_of(run_id[:8]))
        assert error["code"] == AMBIGUOUS, error
        approval = await approve(server, {"runId": run_id[:9], "message": "x"})  # unique again
        assert approval["contract"]["runId"] == run_id
        await server.finish()


async def test_a_running_child_is_not_resumable(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        run = await result_of(server, "spawn", {"command": ["sleep", "300"]})
        run_id = run["runId"]
        assert run["status"] in ("queued", "running"), run
        for resume in (resume_of(run_id)["resume"], resume_of(run_id, index=0)["resume"]):
            result = await refused(server, resume, "still-running")
            assert result["diagnostics"][0]["severity"] == "error"
        stopped = await result_of(server, "stop", {"runId": run_id, "graceMs": 1000})
        assert stopped["status"] == "cancelled", stopped
        await approve(server, {"runId": run_id, "message": "x"})  # once it ended, it may be
        await server.finish()


async def test_an_interrupted_run_resumes_only_once_what_its_dead_server_left_has_ended(
    tmp_path: Path,
) -> None:
    # What a dead server's run left is found by the run's marker, which a new attempt
    # carries too: a resume before that clean-up ends would have its own child ended.
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        run_id = await spawn_running(server, STUBBORN_TREE)
        await wait_for_processes(run_id, 3)  # the shell and both sleeps ignore SIGTERM
        taken = await crash(server)
    async with running_server(*state_args(state, "s1", "--grace-ms", "3000")) as server:
        # The clean-up waits out the grace before its SIGKILL: meanwhile, refused.
        await refused(server, {"runId": run_id, "message": "x"}, "still-running")
        await wait_until_no_run_survives(taken)
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while True:  # the clean-up tells no client when it is done: ask, bounded
                reply = await result_of(
                    server, "preflight", {"resume": resume_of(run_id)["resume"]}
                )
                if reply["accepted"]:
                    break
                assert error_codes(reply) == ["still-running"], reply
                await asyncio.sleep(POLL_INTERVAL_S)
        await server.finish()


# --- what is stored is checked, never trusted ------------------------------------------


async def test_a_projection_changed_without_its_digest_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        run_id = (await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": "hi"}))["runId"]
        token = (await approve(server, {"runId": run_id, "message": "x"}))["token"]
        await server.finish()

    def swap_argv(projection: dict[str, Any]) -> None:
        projection["argvTemplate"] = TAMPERED_ARGV

    await asyncio.to_thread(change_projection, state, run_id, 0, swap_argv, False)
    async with running_server(*state_args(state)) as server:
        before = await observe(server, run_id)
        error = await denied(server, token)
        assert error["data"]["reason"] in ("not-resumable", "mismatch"), error
        await assert_nothing_started(server, run_id, before)
        await refused(server, {"runId": run_id, "message": "x"}, "projection-mismatch")
        await server.finish()
    assert await asyncio.to_thread(attempts_stored, state, run_id) == [(0, 1)]


async def test_a_projection_resealed_with_a_new_digest_no_longer_matches_the_token(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        run_id = (await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": "hi"}))["runId"]
        approval = await approve(server, {"runId": run_id, "message": "x"})
        await server.finish()

    def swap_argv(projection: dict[str, Any]) -> None:
        projection["argvTemplate"] = TAMPERED_ARGV

    await asyncio.to_thread(change_projection, state, run_id, 0, swap_argv, True)
    async with running_server(*state_args(state)) as server:
        before = await observe(server, run_id)
        error = await denied(server, approval["token"])
        assert error["data"]["reason"] == "mismatch", error
        await assert_nothing_started(server, run_id, before)
        # A new preflight shows what is stored now, under another contract digest.
        shown = await approve(server, {"runId": run_id, "message": "x"})
        assert shown["contract"]["projection"]["argvTemplate"] == TAMPERED_ARGV
        assert shown["contractDigest"] != approval["contractDigest"]
        await server.finish()
    assert await asyncio.to_thread(attempts_stored, state, run_id) == [(0, 1)]


async def test_missing_unknown_version_and_corrupt_projections_are_refused(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    cases = ("projection-unsupported", "projection-missing", "projection-corrupt")
    runs: dict[str, tuple[str, str]] = {}  # code -> (run id, token issued before the change)
    async with running_server(*state_args(state)) as server:
        for code in cases:
            run_id = (await failed_run(server, {"command": ECHO_AND_FAIL, "prompt": code}))["runId"]
            runs[code] = (
                run_id,
                (await approve(server, {"runId": run_id, "message": "m"}))["token"],
            )
        await server.finish()

    def legacy(projection: dict[str, Any]) -> None:
        projection["v"] = 0

    await asyncio.to_thread(
        change_projection, state, runs["projection-unsupported"][0], 0, legacy, True
    )
    deleted = await asyncio.to_thread(
        execute, state, "DELETE FROM children WHERE run_id = ?", runs["projection-missing"][0]
    )
    assert deleted == 1
    corrupted = await asyncio.to_thread(
        execute,
        state,
        "UPDATE children SET projection = '{not json' WHERE run_id = ?",
        runs["projection-corrupt"][0],
    )
    assert corrupted == 1
    async with running_server(*state_args(state)) as server:
        for code, (run_id, token) in runs.items():
            await refused(server, {"runId": run_id, "message": "m"}, code)
            before = await observe(server, run_id)
            error = await denied(server, token)
            assert error["data"]["reason"] == "not-resumable", (code, error)
            assert error["data"].get("code") == code, error
            await assert_nothing_started(server, run_id, before)
        await server.finish()
    for run_id, _ in runs.values():
        assert await asyncio.to_thread(attempts_stored, state, run_id) == [(0, 1)]


# --- overrides and environment ---------------------------------------------------------


async def test_overrides_may_only_lower_the_time_limits(tmp_path: Path) -> None:
    launch = {
        "command": SLOW_ON_REQUEST,
        "prompt": "fast",
        "cwd": str(tmp_path),
        "timeoutMs": 60_000,
        "stallTimeoutMs": 30_000,
    }
    escalations: list[dict[str, Any]] = [
        {"cwd": "/"},
        {"argv": ["sh", "-c", "echo other"]},
        {"argvTemplate": ["sh", "-c", "echo other"]},
        {"model": "x"},
        {"tools": ["command"]},
        {"thinking": "high"},
        {"sessionResources": "lean"},
        {"access": {"network": False}},  # a command child cannot be narrowed
        {"access": {"filesystem": "write"}, "cwd": "/"},
        {"timeoutMs": 60_001},
        {"stallTimeoutMs": 30_001},
        {"env": {}},
        {"outputCapBytes": 1},  # lowering, but not a limit a resume may change
        {"timeoutMs": 0},
        {"timeoutMs": 500.5},
        {"timeoutMs": "500"},
        {"timeoutMs": 500, "cwd": "/"},  # one refused override refuses them all
    ]
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        run_id = (await failed_run(server, launch))["runId"]
        for overrides in escalations:
            result = await refused(
                server,
                {"runId": run_id, "message": "slow", "overrides": overrides},
                "override-not-allowed",
            )
            assert result["diagnostics"][0]["path"] == "resume.overrides", (overrides, result)

        lowered = await approve(
            server, {"runId": run_id, "message": "slow", "overrides": {"timeoutMs": 500}}
        )
        limits = lowered["contract"]["projection"]["limits"]
        assert limits == {"timeoutMs": 500, "stallTimeoutMs": 30_000}, limits
        resumed = await result_of(server, "resume", {"token": lowered["token"], "mode": "task"})
        assert (resumed["status"], resumed["reason"]) == ("timed-out", "timeout"), resumed
        assert resumed["enforcedTimeoutMs"] == 500
        assert resumed["children"][0]["attempt"] == 2

        # A token whose stored overrides grew after it was issued is refused.
        token = (await approve(server, {"runId": run_id, "message": "slow"}))["token"]
        before = await observe(server, run_id)
        grown = await asyncio.to_thread(
            execute,
            state,
            "UPDATE resume_tokens SET overrides = ? WHERE consumed = 0",
            json.dumps({"timeoutMs": 10**8}),
        )
        assert grown == 1
        error = await denied(server, token)
        assert error["data"]["reason"] == "override-not-allowed", error
        await assert_nothing_started(server, run_id, before)
        await server.finish()


async def test_a_child_launched_with_env_resumes_only_in_the_server_that_knows_the_values(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    launch = {
        "command": ["sh", "-c", "cat; echo; echo X=$X; exit 3"],
        "prompt": "hi",
        "env": {"X": "value-of-x"},
    }
    async with running_server(*state_args(state)) as server:
        run_id = (await failed_run(server, launch))["runId"]
        approval = await approve(server, {"runId": run_id, "message": "again"})
        assert approval["contract"]["projection"]["envKeys"] == ["X"]
        assert "value-of-x" not in json.dumps(approval)  # values are never shown nor stored
        resumed = await result_of(server, "resume", {"token": approval["token"], "mode": "task"})
        child = resumed["children"][0]
        assert child["attempt"] == 2 and "X=value-of-x" in child["output"]["text"], child
        later = (await approve(server, {"runId": run_id, "message": "later"}))["token"]
        await server.finish()

    async with running_server(*state_args(state)) as server:
        await refused(server, {"runId": run_id, "message": "again"}, "environment-gone")
        before = await observe(server, run_id)
        error = await denied(server, later)
        assert error["data"]["reason"] == "not-resumable", error
        assert error["data"].get("code") == "environment-gone", error
        await assert_nothing_started(server, run_id, before)
        await server.finish()
    assert await asyncio.to_thread(attempts_stored, state, run_id) == [(0, 1), (0, 2)]
