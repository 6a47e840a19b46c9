"""Interactive children on a cluster node, over real stdio (`--executor ray`): what a
client says reaches a child on the second node of a local two-node Ray cluster
(tests/raycluster.py) as it reaches one here (protocol.md §23), through the bridge,
the child's actor and its shim: `run/send` is answered, `run/interrupt` signals
its group there or ends its agent's turn (and the tool that turn left running),
`run/close` ends it `completed`. No process of a run is left on either node after
a test. Skipped without the `ray` extra.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import pytest

pytest.importorskip("ray")

from tests import raycluster  # noqa: E402
from tests.e2e.agents import AGENT_BIN, PI_SPAWN, pi_environment, server_args  # noqa: E402
from tests.e2e.harness import running_server, state_args  # noqa: E402
from tests.e2e.live import LiveClient, gone, tool_process  # noqa: E402
from tests.e2e.test_ray_executor import none_left  # noqa: E402
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_SLEEP_TOOL, MockLLM  # noqa: E402
from tests.raycluster import CLUSTER_ENVIRONMENT, TwoNodes  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

two_nodes = raycluster.two_nodes  # the module's own cluster (a module-scoped fixture)

# Answers each line with `got <line>`, but `quiet` lines (a turn that goes on); a SIGINT
# is survived, and said on stderr: the signal reached it there.
LINES: Final = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, lambda *_: os.write(2, b'SIGINT\\n'))\n"
    "for l in sys.stdin:\n"
    "    if not l.startswith('quiet'):\n"
    "        print('got', l.strip(), flush=True)\n"
)


async def test_an_interactive_command_on_the_worker_node_is_answered_interrupted_and_closed(
    two_nodes: TwoNodes, tmp_path: Path
) -> None:
    options = ("--executor", "ray", "--ray-address", two_nodes.address)
    async with running_server(*options, *state_args(tmp_path / "state")) as server:
        client = LiveClient(server)
        spawn = {
            "command": [sys.executable, "-u", "-c", LINES],
            "prompt": "hello",
            "interactive": True,
            "stream": True,
            "placement": {"nodeId": two_nodes.worker},
        }
        run_id = (await client.result("spawn", spawn))["runId"]
        await client.turn_ended(run_id)
        status = await client.result("status", {"runId": run_id})
        assert status["children"][0]["node"] == two_nodes.worker, status
        sent = await client.result("run/send", {"runId": run_id, "text": "again"})
        assert sent["state"] == "delivered"
        assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
        # A turn that goes on, interrupted: SIGINT to its group on its node.
        await client.result("run/send", {"runId": run_id, "text": "quiet please"})
        interrupted = await client.result("run/interrupt", {"runId": run_id})
        assert interrupted["interrupted"] is True
        assert (await client.turn_ended(run_id))["stopReason"] == "interrupted"
        await client.first(lambda e: e["type"] == "stderr" and "SIGINT" in e["text"])
        sent = await client.result("run/send", {"runId": run_id, "text": "still there?"})
        assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
        closed = await client.result("run/close", {"runId": run_id})
        child = closed["children"][0]
        assert (closed["status"], child["status"]) == ("completed", "completed"), closed
        assert child["exitCode"] == 0 and child["node"] == two_nodes.worker, child
        assert child["output"]["text"] == "got hello\ngot again\ngot still there?\n", child
        await server.finish()
        await none_left(server.run_ids)


@pytest.mark.skipif(not (AGENT_BIN / "pi").exists(), reason="the pinned pi CLI is not installed")
async def test_an_interactive_pi_on_the_worker_node_talks_and_its_interrupted_tool_ends(
    two_nodes: TwoNodes, tmp_path: Path, mock: MockLLM
) -> None:
    env = {**pi_environment(tmp_path, mock.openai_base_url, retries=False), **CLUSTER_ENVIRONMENT}
    options = ("--executor", "ray", "--ray-address", two_nodes.address)
    async with running_server(*options, *server_args(tmp_path), env=env) as server:
        client = LiveClient(server)
        spawn = {
            **PI_SPAWN,
            "prompt": f"{KEYWORD_ANSWER_NOW} REPEAT:first",
            "interactive": True,
            "stream": True,
            "placement": {"nodeId": two_nodes.worker},
        }
        run_id = (await client.result("spawn", spawn))["runId"]
        assert (await client.answer(run_id)).endswith(" first")
        second = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:second"}
        assert (await client.result("run/send", second))["state"] == "delivered"
        assert (await client.answer(run_id)).endswith(" second")
        # A long tool, interrupted: the turn ends, and the tool's process on its node with it.
        long = {"runId": run_id, "text": f"{KEYWORD_SLEEP_TOOL} please"}
        assert (await client.result("run/send", long))["state"] == "delivered"
        sleep = await tool_process(run_id, "sleep")
        assert (await client.result("run/interrupt", {"runId": run_id}))["interrupted"] is True
        assert (await client.turn_ended(run_id))["stopReason"] == "interrupted"
        assert await gone(sleep)
        after = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:after"}
        assert (await client.result("run/send", after))["state"] == "delivered"
        assert (await client.answer(run_id)).endswith(" after")
        closed = await client.result("run/close", {"runId": run_id})
        child = closed["children"][0]
        assert (closed["status"], child["status"]) == ("completed", "completed"), closed
        assert child["node"] == two_nodes.worker and child["turn"]["count"] == 4, child
        assert child["output"]["text"].endswith(" after")
        await server.finish()
        await none_left(server.run_ids)
