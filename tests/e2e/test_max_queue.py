"""`--max-queue` over real stdio: a spawn or resume that would queue too many children is
refused -32005 with `data {queued, limit}`, and nothing of it is recorded or started
(protocol.md §8.4). The harness proves afterwards that no process of any run is left."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.harness import (
    ServerProcess,
    error_of,
    result_of,
    running_server,
    state_args,
)

CAPACITY_EXCEEDED = -32005
SLEEPER = {"command": ["sleep", "300"]}


async def run_ids(server: ServerProcess) -> set[str]:
    return {run["runId"] for run in (await result_of(server, "status", {}))["runs"]}


async def fill_the_queue(server: ServerProcess) -> tuple[dict[str, Any], dict[str, Any]]:
    """One sleeper running (its reply comes once it started), one waiting for the slot."""
    running = await result_of(server, "spawn", SLEEPER)
    assert running["status"] == "running", running
    waiting = await result_of(server, "spawn", SLEEPER)
    assert waiting["status"] == "queued", waiting
    return running, waiting


async def test_a_spawn_beyond_max_queue_is_refused_and_nothing_of_it_is_recorded(
    tmp_path: Path,
) -> None:
    args = state_args(tmp_path, "s1", "--max-concurrency", "1", "--max-queue", "1")
    async with running_server(*args) as server:
        running, waiting = await fill_the_queue(server)
        approved = await result_of(server, "preflight", {"command": ["echo", "approved"]})
        for params in (
            {"command": ["echo", "one too many"]},
            {"tasks": [{"command": ["true"]}, {"command": ["true"]}], "mode": "task"},
            {"command": ["echo", "approved"], "preflightId": approved["preflightId"]},
        ):
            error = await error_of(server, "spawn", params)
            assert error["code"] == CAPACITY_EXCEEDED, error
            assert error["data"] == {"queued": 1, "limit": 1}
        assert await run_ids(server) == {running["runId"], waiting["runId"]}

        await result_of(server, "stop", {"runId": waiting["runId"], "graceMs": 100})
        # Room again: the refused preflight id was not spent.
        admitted = await result_of(
            server,
            "spawn",
            {"command": ["echo", "approved"], "preflightId": approved["preflightId"]},
        )
        assert admitted["admittedBy"] == "preflight"
        await result_of(server, "stop", {"runId": admitted["runId"], "graceMs": 100})
        await result_of(server, "stop", {"runId": running["runId"], "graceMs": 100})
        await server.finish()


async def test_a_resume_beyond_max_queue_is_refused_and_its_token_stays_valid(
    tmp_path: Path,
) -> None:
    args = state_args(tmp_path, "s1", "--max-concurrency", "1", "--max-queue", "0")
    async with running_server(*args) as server:
        failed = await result_of(
            server, "spawn", {"command": ["sh", "-c", "cat; exit 3"], "mode": "task"}
        )
        assert failed["status"] == "failed"
        approval = await result_of(
            server, "preflight", {"resume": {"runId": failed["runId"], "message": "again"}}
        )
        blocker = await result_of(server, "spawn", SLEEPER)
        error = await error_of(server, "resume", {"token": approval["token"], "mode": "task"})
        assert error["code"] == CAPACITY_EXCEEDED and error["data"] == {"queued": 0, "limit": 0}
        unchanged = await result_of(server, "status", {"runId": failed["runId"]})
        assert unchanged["children"][0]["attempt"] == 1
        assert unchanged["lastSeq"] == failed["lastSeq"]

        await result_of(server, "stop", {"runId": blocker["runId"], "graceMs": 100})
        resumed = await result_of(server, "resume", {"token": approval["token"], "mode": "task"})
        assert resumed["children"][0]["attempt"] == 2
        await server.finish()
