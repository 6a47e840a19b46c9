"""`--executor ray` over real stdio: children on the nodes of a local two-node Ray cluster.

The server is the installed one, told to place children on the module's cluster
(tests/raycluster.py); each test drives it as a client would and proves that what
it was promised holds there as it does locally: output streamed with gap-free
`seq`, exit statuses, stop of a whole tree (TERM, grace, KILL), timeouts, honest
failures (an unplaceable child, a lost bridge, an unreachable cluster) and nothing
left on either node afterwards, even after the server's SIGKILL. Skipped without
the `ray` extra.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest

pytest.importorskip("ray")

from tests import raycluster  # noqa: E402
from tests.e2e.agents import server_args  # noqa: E402
from tests.e2e.harness import (  # noqa: E402
    ServerProcess,
    error_of,
    marked_processes,
    result_of,
    running_server,
    state_args,
)
from tests.e2e.test_agent_clis import Cli, each_cli  # noqa: E402
from tests.mock_llm import MockLLM  # noqa: E402
from tests.raycluster import (  # noqa: E402
    CLUSTER_ENVIRONMENT,
    HEAD_RESOURCE,
    WORKER_RESOURCE,
    TwoNodes,
)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

two_nodes = raycluster.two_nodes  # the module's own cluster (a module-scoped fixture)

NODES = (HEAD_RESOURCE, WORKER_RESOURCE)
WAIT_S = 60.0
# A tree that ignores SIGTERM: a daemon in a session of its own, and the child itself.
STUBBORN = (
    "trap '' TERM; setsid sh -c \"trap '' TERM; sleep 300\" & echo ready; while :; do sleep 1; done"
)


@pytest.fixture
async def ray_server(two_nodes: TwoNodes, tmp_path: Path) -> AsyncIterator[ServerProcess]:
    async with running_server(
        "--executor",
        "ray",
        "--ray-address",
        two_nodes.address,
        "--ray-namespace",
        "tests",
        *state_args(tmp_path / "state"),
    ) as server:
        yield server
        await server.finish()
        await none_left(server.run_ids)


async def none_left(run_ids: set[str]) -> None:
    """Wait (bounded) until no process on either node carries one of the runs' markers."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while left := await asyncio.to_thread(marked_processes, run_ids):
        assert loop.time() < deadline, f"left behind: {left}"
        await asyncio.sleep(0.1)  # other processes' ends: nothing of ours to await


def placed(resource: str) -> dict[str, Any]:
    return {"resources": {resource: 1}}


async def events_until(
    server: ServerProcess, run_id: str, wanted: str, status: str | None = None
) -> list[dict[str, Any]]:
    """The run's events up to the first of type `wanted` (with `status`, if given)."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(WAIT_S):
        while True:
            message = await server.receive()
            params = message.get("params") or {}
            if message.get("method") != "run/event" or params.get("runId") != run_id:
                continue
            seen.append(params)
            if params["type"] == wanted and status in (None, params.get("status")):
                return seen


async def test_a_child_placed_on_either_node_runs_there_streams_every_line_and_exits(
    ray_server: ServerProcess, two_nodes: TwoNodes
) -> None:
    lines = 2000
    for resource in NODES:
        program = f"for i in range({lines}): print('line', i)"
        run = await result_of(
            ray_server,
            "spawn",
            {
                "command": [sys.executable, "-c", program],
                "stream": True,
                "placement": placed(resource),
            },
        )
        events = await events_until(ray_server, run["runId"], "status", "completed")
        seqs = [event["seq"] for event in events]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "seq has a gap"
        text = "".join(event["text"] for event in events if event["type"] == "output")
        assert text.splitlines() == [f"line {i}" for i in range(lines)]
        snapshot = await result_of(ray_server, "status", {"runId": run["runId"]})
        child = snapshot["children"][0]
        assert child["status"] == "completed" and child["exitCode"] == 0, child
        assert child["node"] == two_nodes.node_of(resource)
        assert child["resources"]["cpuSeconds"] >= 0, child


async def test_stop_ends_a_remote_tree_that_ignores_sigterm_on_either_node(
    ray_server: ServerProcess,
) -> None:
    for resource in NODES:
        run = await result_of(
            ray_server,
            "spawn",
            {"command": ["sh", "-c", STUBBORN], "stream": True, "placement": placed(resource)},
        )
        await events_until(ray_server, run["runId"], "output")
        stopped = await result_of(ray_server, "stop", {"runId": run["runId"], "graceMs": 500})
        assert stopped["status"] == "cancelled", stopped
        assert stopped["children"][0]["stoppedBy"] == "sigkill", stopped
        await none_left({run["runId"]})


async def test_a_remote_child_past_its_timeout_is_timed_out_and_its_tree_ended(
    ray_server: ServerProcess,
) -> None:
    run = await result_of(
        ray_server,
        "spawn",
        {
            "command": ["sh", "-c", STUBBORN],
            "mode": "task",
            # The timeout also bounds the wait for a node to take the child (protocol.md §8.8): on a
            # loaded machine that alone can take seconds, and then the child fails unplaced.
            "timeoutMs": 10000,
            "placement": placed(WORKER_RESOURCE),
        },
    )
    assert run["status"] == "timed-out" and run["reason"] == "timeout", run
    await none_left({run["runId"]})


async def test_a_daemon_left_by_a_remote_child_that_completed_is_ended(
    ray_server: ServerProcess,
) -> None:
    run = await result_of(
        ray_server,
        "spawn",
        {
            "command": ["sh", "-c", "setsid sleep 300 & echo done"],
            "mode": "task",
            "placement": placed(WORKER_RESOURCE),
        },
    )
    assert run["status"] == "completed", run
    child = run["children"][0]
    assert child["resources"]["leftoversEnded"] >= 1, child
    await none_left({run["runId"]})


async def test_a_placement_no_node_can_hold_fails_within_the_child_s_timeout(
    ray_server: ServerProcess,
) -> None:
    run = await result_of(
        ray_server,
        "spawn",
        {
            "command": ["true"],
            "mode": "task",
            "timeoutMs": 3000,
            "placement": {"resources": {"gpu": 8}},
        },
    )
    assert run["status"] == "failed", run
    error = run["children"][0]["error"]
    assert error["code"] == "unplaceable", error
    assert "gpu" in error["message"] and "within 3" in error["message"], error


async def test_the_placement_is_in_the_plan_and_its_fingerprint(
    ray_server: ServerProcess, two_nodes: TwoNodes
) -> None:
    here = await result_of(
        ray_server,
        "preflight",
        {"command": ["true"], "placement": {"nodeId": two_nodes.head}},
    )
    there = await result_of(
        ray_server,
        "preflight",
        {"command": ["true"], "placement": {"nodeId": two_nodes.worker}},
    )
    assert here["accepted"] and there["accepted"], (here, there)
    assert here["plan"]["children"][0]["placement"] == {"nodeId": two_nodes.head}
    assert here["fingerprint"] != there["fingerprint"]


async def test_a_resumed_child_runs_on_the_node_its_launch_placed_it(
    ray_server: ServerProcess, two_nodes: TwoNodes
) -> None:
    placement = {"nodeId": two_nodes.worker}
    spawn = {"command": ["sh", "-c", "cat; exit 3"], "prompt": "hi", "placement": placement}
    run = await result_of(ray_server, "spawn", {**spawn, "mode": "task"})
    assert run["status"] == "failed" and run["children"][0]["node"] == two_nodes.worker, run
    approval = await result_of(
        ray_server, "preflight", {"resume": {"runId": run["runId"], "message": "again"}}
    )
    assert approval["accepted"] is True, approval
    assert approval["contract"]["projection"]["placement"] == placement  # approved as placed
    resumed = await result_of(ray_server, "resume", {"token": approval["token"], "mode": "task"})
    child = resumed["children"][0]
    assert child["attempt"] == 2 and child["exitCode"] == 3, child
    assert child["node"] == two_nodes.worker, child  # where the launch placed it, again


async def test_the_bridge_s_death_fails_its_children_as_node_lost_and_a_new_one_is_opened(
    ray_server: ServerProcess,
) -> None:
    run = await result_of(
        ray_server,
        "spawn",
        {
            "command": ["sh", "-c", "setsid sleep 300 & echo ready; exec sleep 300"],
            "stream": True,
            "placement": placed(WORKER_RESOURCE),
        },
    )
    await events_until(ray_server, run["runId"], "output")
    bridges = [
        process
        for process in psutil.Process(ray_server.pid).children()
        if "subagent_host.executors.ray_bridge" in process.cmdline()
    ]
    assert len(bridges) == 1, bridges
    bridges[0].kill()  # by pid: the server's bridge, the cluster's driver
    events = await events_until(ray_server, run["runId"], "status", "failed")
    assert events[-1]["status"] == "failed"
    snapshot = await result_of(ray_server, "status", {"runId": run["runId"]})
    assert snapshot["children"][0]["error"]["code"] == "node-lost", snapshot
    await none_left({run["runId"]})
    again = await result_of(
        ray_server,
        "spawn",
        {"command": ["echo", "again"], "mode": "task", "placement": placed(WORKER_RESOURCE)},
    )
    assert again["status"] == "completed", again


async def test_the_server_s_sigkill_leaves_nothing_on_either_node_and_the_next_server_says_so(
    two_nodes: TwoNodes, tmp_path: Path
) -> None:
    options = ("--executor", "ray", "--ray-address", two_nodes.address)
    async with running_server(*options, *state_args(tmp_path / "state")) as server:
        runs = []
        for resource in NODES:
            run = await result_of(
                server,
                "spawn",
                {"command": ["sh", "-c", STUBBORN], "stream": True, "placement": placed(resource)},
            )
            await events_until(server, run["runId"], "output")
            runs.append(run["runId"])
        server.signal(signal.SIGKILL)
        await server.finish()
        await none_left(set(runs))
    async with running_server(*options, *state_args(tmp_path / "state")) as later:
        for run_id in runs:
            snapshot = await result_of(later, "status", {"runId": run_id})
            assert snapshot["status"] == "interrupted", snapshot
        await later.finish()


async def test_an_unreachable_cluster_is_backend_unavailable_at_preflight_and_spawn(
    tmp_path: Path,
) -> None:
    options = ("--executor", "ray", "--ray-address", "127.0.0.1:9")
    async with running_server(*options, *state_args(tmp_path / "state")) as server:
        for method in ("preflight", "spawn"):
            error = await error_of(server, method, {"command": ["true"]})
            assert error["code"] == -32002, error
            assert "127.0.0.1:9" in error["message"], error
            assert error["data"]["diagnostics"][0]["code"] == "cluster-unavailable", error
        await server.finish()


async def test_a_silent_remote_child_is_timed_out_by_its_stall_timeout(
    ray_server: ServerProcess,
) -> None:
    run = await result_of(
        ray_server,
        "spawn",
        {
            "command": ["sh", "-c", "echo started; exec sleep 300"],
            "mode": "task",
            "stallTimeoutMs": 1500,
            "placement": placed(HEAD_RESOURCE),
        },
    )
    assert run["status"] == "timed-out" and run["reason"] == "stall", run
    await none_left({run["runId"]})


@each_cli()
async def test_each_agent_cli_runs_on_a_cluster_node_as_it_runs_here(
    two_nodes: TwoNodes, tmp_path: Path, mock: MockLLM, cli: Cli
) -> None:
    env = {**cli.mock_environment(tmp_path, mock), **CLUSTER_ENVIRONMENT}
    options = ("--executor", "ray", "--ray-address", two_nodes.address)
    async with running_server(*options, *server_args(tmp_path), env=env) as server:
        spawn = {
            **cli.spawn,
            "prompt": "look around",
            "mode": "task",
            "placement": placed(WORKER_RESOURCE),
        }
        run = await result_of(server, "spawn", spawn)
        child = run["children"][0]
        assert run["status"] == "completed", run
        assert child["node"] == two_nodes.worker
        assert child["output"]["text"].startswith("MOCK-FINAL: scenario=after-tool")
        assert child["usage"]["inputTokens"] > 0 and child["backendSessionId"]
        await server.finish()
        await none_left(server.run_ids)
    cli.completed(child, mock)


async def test_remote_children_count_against_the_server_s_concurrency_limit(
    two_nodes: TwoNodes, tmp_path: Path
) -> None:
    options = ("--executor", "ray", "--ray-address", two_nodes.address, "--max-concurrency", "1")
    async with running_server(*options, *state_args(tmp_path / "state")) as server:
        first = await result_of(
            server,
            "spawn",
            {
                "command": ["sh", "-c", "echo ready; exec sleep 300"],
                "stream": True,
                "placement": placed(WORKER_RESOURCE),
            },
        )
        await events_until(server, first["runId"], "output")
        second = await result_of(
            server, "spawn", {"command": ["echo", "second"], "placement": placed(HEAD_RESOURCE)}
        )
        assert second["status"] == "queued", second  # the one slot is the first's
        await result_of(server, "stop", {"runId": first["runId"]})
        await events_until(server, second["runId"], "status", "completed")
        await server.finish()
        await none_left(server.run_ids)


async def test_a_stop_while_a_child_waits_for_a_node_cancels_it_at_once(
    ray_server: ServerProcess,
) -> None:
    run = await result_of(
        ray_server,
        "spawn",
        {"command": ["true"], "placement": {"resources": {"gpu": 8}}, "timeoutMs": 120_000},
    )
    stopped = await asyncio.wait_for(
        result_of(ray_server, "stop", {"runId": run["runId"]}), 20
    )  # far below the 60 s a placement may wait
    assert stopped["status"] == "cancelled", stopped
    assert stopped["children"][0]["status"] == "cancelled", stopped
    assert "pid" not in stopped["children"][0]
    # The bridge dropped it: a later child on the same cluster runs.
    again = await result_of(ray_server, "spawn", {"command": ["echo", "next"], "mode": "task"})
    assert again["status"] == "completed", again
