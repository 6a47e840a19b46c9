"""Interactive children on a cluster node, over real stdio (`--executor ray`): what a
client says reaches a child on the second node of a local two-node Ray cluster
(tests/raycluster.py) as it reaches one here (protocol.md §23), through the bridge,
the child's actor and its shim: `run/send` is answered, `run/interrupt` signals
its group there or ends its agent's turn (and the tool of that turn ends: pi ends
it, and what codex leaves running the server ends on its node), `run/close` ends
it `completed`. No process of a run is left on either node after
a test. Skipped without the `ray` extra.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

import pytest

pytest.importorskip("ray")

from tests import raycluster  # noqa: E402
from tests.e2e.agents import (  # noqa: E402
    AGENT_BIN,
    CODEX_SPAWN,
    PI_SPAWN,
    codex_environment,
    pi_environment,
    server_args,
)
from tests.e2e.harness import running_server, state_args  # noqa: E402
from tests.e2e.live import LiveClient, interrupted_mid_tool  # noqa: E402
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


async def agent_on_the_worker(
    two_nodes: TwoNodes, tmp_path: Path, env: dict[str, str], spawn: dict[str, Any]
) -> dict[str, Any]:
    """`spawn`, an agent made interactive, on the worker node of a server with `env`: it
    answers its prompt and a message, a long tool of its is interrupted (its process on
    that node ends), it answers after, and is closed `completed`. The closed child."""
    options = ("--executor", "ray", "--ray-address", two_nodes.address)
    env = {**env, **CLUSTER_ENVIRONMENT}
    async with running_server(*options, *server_args(tmp_path), env=env) as server:
        client = LiveClient(server)
        placed = {"interactive": True, "stream": True, "placement": {"nodeId": two_nodes.worker}}
        first = {**spawn, **placed, "prompt": f"{KEYWORD_ANSWER_NOW} REPEAT:first"}
        run_id = (await client.result("spawn", first))["runId"]
        assert (await client.answer(run_id)).endswith(" first")
        second = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:second"}
        assert (await client.result("run/send", second))["state"] == "delivered"
        assert (await client.answer(run_id)).endswith(" second")
        await interrupted_mid_tool(client, run_id, f"{KEYWORD_SLEEP_TOOL} please")
        after = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:after"}
        assert (await client.result("run/send", after))["state"] == "delivered"
        assert (await client.answer(run_id)).endswith(" after")
        closed = await client.result("run/close", {"runId": run_id})
        child: dict[str, Any] = closed["children"][0]
        assert (closed["status"], child["status"]) == ("completed", "completed"), closed
        assert child["node"] == two_nodes.worker and child["turn"]["count"] == 4, child
        assert child["output"]["text"].endswith(" after")
        await server.finish()
        await none_left(server.run_ids)
    return child


@pytest.mark.skipif(not (AGENT_BIN / "pi").exists(), reason="the pinned pi CLI is not installed")
async def test_an_interactive_pi_on_the_worker_node_talks_and_its_interrupted_tool_ends(
    two_nodes: TwoNodes, tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url, retries=False)
    await agent_on_the_worker(two_nodes, tmp_path, env, PI_SPAWN)


@pytest.mark.skipif(
    not (AGENT_BIN / "codex").exists(), reason="the pinned codex CLI is not installed"
)
async def test_the_command_codex_leaves_running_on_the_worker_node_is_ended_there(
    two_nodes: TwoNodes, tmp_path: Path, mock: MockLLM
) -> None:
    # Interrupted once codex announced its command, codex leaves it running: the server
    # has its shim end what the turn started, on its node, and not codex.
    env = codex_environment(tmp_path, mock.openai_base_url)
    child = await agent_on_the_worker(two_nodes, tmp_path, env, CODEX_SPAWN)
    assert child["resources"]["leftoversEnded"] >= 1, child
