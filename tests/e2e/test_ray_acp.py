"""An ACP agent configured as a backend, its child on a cluster node (`--executor ray`):
the project's own ACP agent (subagent_host/conformance/acp_agent.py, on the official
SDK) runs on the second node of a local two-node Ray cluster (tests/raycluster.py) as
any driven child does (protocol.md §8.8, §24): a one-shot turn runs its tool there and
is told back; an interactive child answers a message, an interrupt mid-tool cancels its
turn (`session/cancel`) and its command there ends; a stop of a running turn cancels it
first, then ends the tree; Qwen Code (pinned) runs a tool turn there. No process of a
run is left on either node after a test. Skipped without the `ray` extra.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

import pytest

pytest.importorskip("ray")

from tests import raycluster  # noqa: E402
from tests.backends.fixtures.record_acp import WRITE_COMMAND, WRITTEN  # noqa: E402
from tests.e2e.agents import AGENT_BIN, server_args  # noqa: E402
from tests.e2e.harness import EXIT_TIMEOUT_S, running_server  # noqa: E402
from tests.e2e.live import LiveClient, gone, tool_process  # noqa: E402
from tests.e2e.test_acp_qwen_guard import qwen_server  # noqa: E402
from tests.e2e.test_ray_executor import none_left  # noqa: E402
from tests.mock_llm import MockLLM  # noqa: E402
from tests.raycluster import CLUSTER_ENVIRONMENT, TwoNodes  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

two_nodes = raycluster.two_nodes  # the module's own cluster (a module-scoped fixture)

BACKEND: Final = "acp-test"


def options(two_nodes: TwoNodes, tmp_path: Path) -> tuple[str, ...]:
    """A server on the cluster, with the test agent configured as the backend `acp-test`
    (in its `default` mode it asks before commands; the host answers from `access`)."""
    agent = ["-m", "subagent_host.conformance.acp_agent", "--state", str(tmp_path / "agent")]
    backend = {"protocol": "acp", "executable": sys.executable, "args": agent}
    config = tmp_path / "subagents.json"
    config.write_text(json.dumps({"backends": {BACKEND: backend}}))
    ray = ("--executor", "ray", "--ray-address", two_nodes.address)
    return (*ray, *server_args(tmp_path), "--config", str(config))


def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def on_worker(two_nodes: TwoNodes, work: Path, backend: str, **fields: Any) -> dict[str, Any]:
    """A streamed spawn of `backend` in `work`, placed on the worker node."""
    placement = {"nodeId": two_nodes.worker}
    return {"backend": backend, "stream": True, "cwd": str(work), "placement": placement, **fields}


async def test_a_one_shot_turn_runs_its_tool_on_the_worker_node_and_says_so(
    two_nodes: TwoNodes, tmp_path: Path
) -> None:
    work = workdir(tmp_path)
    async with running_server(*options(two_nodes, tmp_path), env=CLUSTER_ENVIRONMENT) as server:
        client = LiveClient(server)
        spawn = on_worker(two_nodes, work, BACKEND, prompt="hello\nrun: printf x > f", mode="task")
        run = await client.result("spawn", spawn)
        [child] = run["children"]
        assert (run["status"], child["status"]) == ("completed", "completed"), run
        assert child["node"] == two_nodes.worker, child
        # Its final text is what it said after its tool: the tool's kind and how it ended.
        assert child["output"]["text"] == "execute: completed\n", child
        said = await client.next(run["runId"], type="message")
        assert said["text"].startswith("echo: "), said
        tool = await client.next(run["runId"], type="tool", phase="start")
        assert tool["kind"] == "execute", tool
        answered = await client.next(run["runId"], type="permission", stage="answered")
        assert answered["answeredBy"] == "policy", answered
        assert (work / "f").read_text() == "x"
        await server.finish()
        await none_left(server.run_ids)


async def test_an_interactive_acp_child_on_the_worker_node_talks_and_is_interrupted_mid_tool(
    two_nodes: TwoNodes, tmp_path: Path
) -> None:
    work = workdir(tmp_path)
    async with running_server(*options(two_nodes, tmp_path), env=CLUSTER_ENVIRONMENT) as server:
        client = LiveClient(server)
        spawn = on_worker(two_nodes, work, BACKEND, prompt="hello", interactive=True)
        run_id = (await client.result("spawn", spawn))["runId"]
        assert (await client.answer(run_id)) == "echo: hello"
        sent = await client.result("run/send", {"runId": run_id, "text": "again"})
        assert sent["state"] == "delivered"
        assert (await client.answer(run_id)) == "echo: again"
        # A long tool, interrupted: the turn is cancelled and the agent ends its command.
        sent = await client.result("run/send", {"runId": run_id, "text": "run: sleep 30"})
        assert sent["state"] == "delivered"
        await client.next(run_id, type="tool", phase="start")
        sleep = await tool_process(run_id, "sleep")
        assert (await client.result("run/interrupt", {"runId": run_id}))["interrupted"]
        assert (await client.turn_ended(run_id))["stopReason"] == "interrupted"
        assert await gone(sleep)
        sent = await client.result("run/send", {"runId": run_id, "text": "still there?"})
        assert (await client.answer(run_id)) == "echo: still there?"
        closed = await client.result("run/close", {"runId": run_id})
        child: dict[str, Any] = closed["children"][0]
        assert (closed["status"], child["status"]) == ("completed", "completed"), closed
        assert child["node"] == two_nodes.worker and child["turn"]["count"] == 4, child
        await server.finish()
        await none_left(server.run_ids)


async def test_a_stop_of_a_running_turn_on_the_worker_node_cancels_it_then_ends_the_tree(
    two_nodes: TwoNodes, tmp_path: Path
) -> None:
    work = workdir(tmp_path)
    async with running_server(*options(two_nodes, tmp_path), env=CLUSTER_ENVIRONMENT) as server:
        client = LiveClient(server)
        spawn = on_worker(two_nodes, work, BACKEND, prompt="run: sleep 30")
        run_id = (await client.result("spawn", spawn))["runId"]
        sleep = await tool_process(run_id, "sleep")
        stopped = await client.result("stop", {"runId": run_id, "graceMs": 5000})
        assert stopped["status"] == "cancelled", stopped
        assert stopped["children"][0]["status"] == "cancelled", stopped
        # The turn was cancelled through ACP first: it ended `interrupted`.
        assert (await client.turn_ended(run_id))["stopReason"] == "interrupted"
        assert await gone(sleep)
        await server.finish()
        await none_left(server.run_ids)


@pytest.mark.skipif(
    not (AGENT_BIN / "qwen").exists(), reason="the pinned qwen CLI is not installed"
)
async def test_qwen_on_the_worker_node_runs_its_tool_turn_there(
    two_nodes: TwoNodes, tmp_path: Path
) -> None:
    work = workdir(tmp_path)
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        args, env = qwen_server(tmp_path, mock)
        ray = ("--executor", "ray", "--ray-address", two_nodes.address)
        async with running_server(*ray, *args, env={**env, **CLUSTER_ENVIRONMENT}) as server:
            client = LiveClient(server)
            spawn = on_worker(two_nodes, work, "qwen", prompt="write it please", mode="task")
            # A model turn of a real CLI, started on the worker node.
            run = await client.result("spawn", spawn, EXIT_TIMEOUT_S * 3)
            [child] = run["children"]
            assert (run["status"], child["status"]) == ("completed", "completed"), run
            assert child["node"] == two_nodes.worker, child
            tool = await client.next(run["runId"], type="tool", phase="start")
            assert tool["kind"] == "execute", tool
            assert (work / WRITTEN).read_text() == "x"
            await server.finish()
            await none_left(server.run_ids)
