"""Run totals and what a terminal child keeps, end to end: the real pi CLI against the
loopback mock LLM, and `command` children (protocol.md §9, §12).

A run's `usage` is the sum of every attempt of every child, in its snapshot and in
`status {}`; a child stopped in the middle of a tool keeps the usage pi reported before
the stop; every child that ran has `resources`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from tests.e2e.agents import (
    PI_SPAWN,
    needs_cli,
    pi_environment,
    server_args,
    stop_in_the_middle_of_a_tool,
)
from tests.e2e.harness import result_of, running_server
from tests.e2e.test_runs import spawn_until_ready
from tests.mock_llm import KEYWORD_ANSWER_NOW, MockLLM

Json = dict[str, Any]
T = TypeVar("T")
TOKENS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")


def with_pi(test: T) -> T:
    """Marks a test of the real pi CLI: e2e, skipped when it is not installed."""
    for mark in needs_cli("pi"):
        test = cast(T, mark(test))
    return test


def summed(usages: list[Json]) -> Json:
    """The usages added up as protocol.md §12 says: tokens summed, the cost only when
    every one has a cost."""
    total: Json = {name: sum(usage[name] for usage in usages) for name in TOKENS}
    if all("costUsd" in usage for usage in usages):
        total["costUsd"] = sum(usage["costUsd"] for usage in usages)
    return total


def assert_same_usage(actual: Json, expected: Json) -> None:
    assert {k: v for k, v in actual.items() if k != "costUsd"} == {
        k: v for k, v in expected.items() if k != "costUsd"
    }
    assert ("costUsd" in actual) == ("costUsd" in expected)
    if "costUsd" in expected:
        assert actual["costUsd"] == pytest.approx(expected["costUsd"])


def summary_of(listing: Json, run_id: str) -> Json:
    found: Json = next(run for run in listing["runs"] if run["runId"] == run_id)
    return found


@with_pi
async def test_a_runs_usage_is_the_sum_of_its_children_and_of_every_attempt(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        tasks = [
            {**PI_SPAWN, "prompt": "look around"},
            {**PI_SPAWN, "prompt": f"{KEYWORD_ANSWER_NOW} at once"},
            {"command": [sys.executable, "-c", "print('no tokens here')"]},
        ]
        run = await result_of(server, "spawn", {"tasks": tasks, "mode": "task"})
        assert run["status"] == "completed", run
        agents = [child["usage"] for child in run["children"][:2]]
        assert "usage" not in run["children"][2]
        assert_same_usage(run["usage"], summed(agents))
        assert run["usage"]["inputTokens"] > 0
        assert_same_usage(
            summary_of(await result_of(server, "status", {}), run["runId"])["usage"], run["usage"]
        )

        approved = await result_of(
            server,
            "preflight",
            {
                "resume": {
                    "runId": run["runId"],
                    "index": 1,
                    "message": f"{KEYWORD_ANSWER_NOW} more",
                }
            },
        )
        assert approved["accepted"], approved
        resumed = await result_of(server, "resume", {"token": approved["token"], "mode": "task"})
        assert resumed["status"] == "completed", resumed
        second = resumed["children"][1]
        assert second["attempt"] == 2
        expected = summed([*agents, second["usage"]])
        assert_same_usage(resumed["usage"], expected)
        assert_same_usage(
            summary_of(await result_of(server, "status", {}), run["runId"])["usage"], expected
        )
        await server.finish()

    # A later server reads the same totals back from the history, every attempt counted.
    async with running_server(*server_args(tmp_path), env=env) as server:
        stored = await result_of(server, "status", {"runId": run["runId"]})
        assert_same_usage(stored["usage"], expected)
        assert_same_usage(
            summary_of(await result_of(server, "status", {}), run["runId"])["usage"], expected
        )
        await server.finish()


@with_pi
async def test_a_pi_child_stopped_while_its_tool_runs_keeps_the_usage_reported_before(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        run_id = await stop_in_the_middle_of_a_tool(server, PI_SPAWN, "bash")
        stopped = await result_of(server, "status", {"runId": run_id})
        child = stopped["children"][0]
        assert stopped["status"] == "cancelled" and child["status"] == "cancelled", stopped
        # The model's one response (the tool call) was reported before the stop.
        assert child["usage"]["inputTokens"] > 0 and child["usage"]["outputTokens"] > 0
        assert child["resources"]["processes"] >= 1
        assert_same_usage(stopped["usage"], child["usage"])
        await server.finish()


async def test_every_command_child_that_ran_has_resources_however_it_ended(
    tmp_path: Path,
) -> None:
    waits = [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"]
    async with running_server(*server_args(tmp_path)) as server:
        done = await result_of(
            server,
            "spawn",
            {"command": [sys.executable, "-c", "sum(range(10**6))"], "mode": "task"},
        )
        timed_out = await result_of(
            server, "spawn", {"command": waits, "timeoutMs": 300, "mode": "task"}
        )
        running = await spawn_until_ready(server, waits)
        stopped = await result_of(server, "stop", {"runId": running["runId"], "graceMs": 2000})
        runs = (done, timed_out, stopped)
        assert [run["status"] for run in runs] == ["completed", "timed-out", "cancelled"]
        for run in runs:
            resources = run["children"][0]["resources"]
            assert resources["processes"] >= 1 and resources["cpuSeconds"] >= 0, run
            assert resources["peakRssBytes"] >= 0 and resources["leftoversEnded"] == 0, run
            assert "usage" not in run and "usage" not in run["children"][0]
        assert done["children"][0]["resources"]["cpuSeconds"] > 0
        listing = await result_of(server, "status", {})
        assert all("usage" not in summary_of(listing, run["runId"]) for run in runs)
        await server.finish()
