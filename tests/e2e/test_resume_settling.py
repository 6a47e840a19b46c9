"""How a run settles when one of its children timed out and another is resumed.

A run's status follows from its children's newest attempts, exactly once per
attempt (protocol.md §12, §15): a run whose first unfinished child timed out
ends `timed-out` with that child's enforced timeout, however often the run
settles again after resumes of its other children, and on whichever server:
`command` children, and pi children against the mock LLM (one whose model never
finishes its answer).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.agents import PI_SPAWN
from tests.e2e.harness import EXIT_TIMEOUT_S, ServerProcess, result_of, running_server, state_args
from tests.e2e.resuming import FOLLOW_UP, PiServers, needs
from tests.e2e.test_durability import POLL_INTERVAL_S, crash, wait_until_no_run_survives
from tests.e2e.test_preflight import error_codes
from tests.e2e.test_resume import ECHO_AND_FAIL, SLOW_ON_REQUEST, approve
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_STALL, MockLLM

# Runs until its timeout ends it.
SLEEPER: Final = ["sleep", "300"]
SHORT_MS: Final = 500
LONGER_MS: Final = 1_500
# Long enough for pi to start and ask the model, which then never finishes its answer.
PI_TIMEOUT_MS: Final = 4_000


def beside_a_timeout(command: list[str], prompt: str) -> list[dict[str, Any]]:
    """`tasks` of a child that times out after SHORT_MS, then `command` reading `prompt`."""
    return [{"command": SLEEPER, "timeoutMs": SHORT_MS}, {"command": command, "prompt": prompt}]


def timed_out_with(run: dict[str, Any], timeout_ms: int) -> None:
    assert run["status"] == "timed-out", run
    assert (run["reason"], run["enforcedTimeoutMs"]) == ("timeout", timeout_ms), run


@pytest.mark.parametrize("restart", [False, True], ids=["same-server", "after-restart"])
async def test_resuming_another_child_still_ends_the_run_timed_out(
    tmp_path: Path, restart: bool
) -> None:
    state = tmp_path / "state"
    tasks = beside_a_timeout(ECHO_AND_FAIL, "hi")
    async with running_server(*state_args(state)) as server:
        run = await result_of(server, "spawn", {"tasks": tasks, "mode": "task"})
        timed_out_with(run, SHORT_MS)
        assert [c["status"] for c in run["children"]] == ["timed-out", "failed"], run
        approval = await approve(server, {"runId": run["runId"], "index": 1, "message": "more"})
        if not restart:
            await resume_the_failed_child(server, run["runId"], approval["token"])
        await server.finish()
    if restart:
        async with running_server(*state_args(state)) as server:
            await resume_the_failed_child(server, run["runId"], approval["token"])
            await server.finish()


async def resume_the_failed_child(server: ServerProcess, run_id: str, token: str) -> None:
    """Child 1 fails again: the run ends as before, with child 0's timeout."""
    resumed = await result_of(server, "resume", {"token": token, "mode": "task"})
    timed_out_with(resumed, SHORT_MS)
    first, second = resumed["children"]
    assert (first["attempt"], first["status"]) == (1, "timed-out"), first
    assert (second["attempt"], second["status"]) == (2, "failed"), second
    timed_out_with(await result_of(server, "status", {"runId": run_id}), SHORT_MS)


async def test_a_run_takes_the_timeout_of_its_first_timed_out_child(tmp_path: Path) -> None:
    # The later child times out last: the run still reports the first child's timeout.
    tasks = [
        {"command": SLEEPER, "timeoutMs": SHORT_MS},
        {"command": SLEEPER, "timeoutMs": LONGER_MS},
    ]
    async with running_server(*state_args(tmp_path / "state")) as server:
        run = await result_of(server, "spawn", {"tasks": tasks, "mode": "task"})
        timed_out_with(run, SHORT_MS)
        await server.finish()


async def test_a_run_whose_server_died_after_a_child_timed_out_resumes_to_timed_out(
    tmp_path: Path,
) -> None:
    # The server that recovers the run (interrupted) never saw the timeout: the
    # child's record carries it.
    state = tmp_path / "state"
    tasks = beside_a_timeout(SLOW_ON_REQUEST, "slow")
    async with running_server(*state_args(state)) as server:
        run = await result_of(server, "spawn", {"tasks": tasks, "mode": "background"})
        run_id = run["runId"]
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while [c["status"] for c in run["children"]] != ["timed-out", "running"]:
                await asyncio.sleep(POLL_INTERVAL_S)  # a client is told nothing: ask
                run = await result_of(server, "status", {"runId": run_id})
        taken = await crash(server)
    async with running_server(*state_args(state)) as server:
        await wait_until_no_run_survives(taken)
        recovered = await result_of(server, "status", {"runId": run_id})
        assert recovered["status"] == "interrupted", recovered
        resume = {"runId": run_id, "index": 1, "message": "fast"}
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while not (reply := await result_of(server, "preflight", {"resume": resume}))[
                "accepted"
            ]:  # the clean-up of the dead server's processes tells no client it is done
                assert error_codes(reply) == ["still-running"], reply
                await asyncio.sleep(POLL_INTERVAL_S)
        await resume_the_failed_child(server, run_id, reply["token"])
        await server.finish()


@needs("pi")
async def test_a_pi_run_resumed_at_its_completed_child_still_ends_timed_out(
    tmp_path: Path, mock: MockLLM
) -> None:
    tasks = [
        {**PI_SPAWN, "prompt": f"{KEYWORD_STALL} think forever", "timeoutMs": PI_TIMEOUT_MS},
        {**PI_SPAWN, "prompt": f"{KEYWORD_ANSWER_NOW} remember MANGO7"},
    ]
    async with PiServers(tmp_path, mock).start() as server:
        run = await result_of(server, "spawn", {"tasks": tasks, "mode": "task"})
        assert [c["status"] for c in run["children"]] == ["timed-out", "completed"], run
        timed_out_with(run, PI_TIMEOUT_MS)
        resume = {"runId": run["runId"], "index": 1, "message": FOLLOW_UP}
        token = (await approve(server, resume))["token"]
        resumed = await result_of(server, "resume", {"token": token, "mode": "task"})
        timed_out_with(resumed, PI_TIMEOUT_MS)
        first, second = resumed["children"]
        assert (first["attempt"], first["status"]) == (1, "timed-out"), first
        assert (second["attempt"], second["status"]) == (2, "completed"), second
        await server.finish()
