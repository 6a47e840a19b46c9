"""Nothing of a remote tree survives, on either node, whatever ends it.

Each case runs a child whose tree holds a daemon in a session of its own that
ignores SIGTERM (what Ray alone leaves behind, reference RAY.md) on the head and
on the second node of the module's two-node cluster: a stop, the child's own
exit, its actor killed through Ray, its worker SIGKILLed, and (on a third node
added for it) the node's removal. Every test ends with the marker sweep of the
machine, which holds every node. Skipped when the `ray` extra is not installed.
(The driver's death: test_ray_cluster.py, both nodes at once.)
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

from subagent_host.executors.bridge import RayBridge, RemoteChild, RemoteFailure  # noqa: E402
from subagent_host.values.placement import Placement  # noqa: E402
from tests.raycluster import (  # noqa: E402
    EXIT_TIMEOUT_S,
    NAMESPACE,
    Collected,
    TwoNodes,
    env_of,
    marked,
    third_node,
)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

FAKES = Path(__file__).parent.parent / "fakes"
NODES = pytest.mark.parametrize("node", ["head", "worker"])
# The child waits; its daemon, in its own session, ignores SIGTERM.
WITH_DAEMON = (
    "setsid sh -c 'trap \"\" TERM; exec sleep 300' </dev/null >/dev/null 2>&1 & "
    "echo ready; exec sleep 300"
)
# A Ray driver of its own (never the test process) that kills one named actor.
KILL_ACTOR = (
    "import ray, sys\n"
    "ray.init(address=sys.argv[1], namespace=sys.argv[2], log_to_driver=False)\n"
    "ray.kill(ray.get_actor(sys.argv[3]), no_restart=True)\n"
)


async def started_with_daemon(
    bridge: RayBridge, marker: str, resource: str
) -> tuple[RemoteChild, Collected]:
    """A child and its daemon running on the node that offers `resource`."""
    sink = Collected()
    child = await bridge.start(
        ["sh", "-c", WITH_DAEMON],
        cwd="/",
        env=env_of(marker),
        grace_s=0.5,
        sink=sink,
        placement=Placement(resources={resource: 1}),
    )
    await sink.until(b"ready\n")
    assert len(await asyncio.to_thread(marked, marker)) == 2  # the child and its daemon
    return child, sink


async def lost(child: RemoteChild) -> RemoteFailure:
    with pytest.raises(RemoteFailure) as failed:
        await asyncio.wait_for(child.ended, EXIT_TIMEOUT_S)
    return failed.value


@NODES
async def test_stop_ends_a_remote_tree_that_ignores_sigterm_with_sigkill(
    bridge: RayBridge, two_nodes: TwoNodes, marker: str, node: str
) -> None:
    sink = Collected()
    child = await bridge.start(
        [sys.executable, str(FAKES / "tree.py"), "5", "--ignore-term"],
        cwd="/",
        env=env_of(marker),
        grace_s=0.5,
        sink=sink,
        placement=Placement(resources={node: 1}),
    )
    assert child.started.result()["node"] == two_nodes.node_of(node)
    await sink.until(b"ready\n")
    assert len(await asyncio.to_thread(marked, marker)) == 5
    child.stop(0.5)
    ended = await asyncio.wait_for(child.ended, EXIT_TIMEOUT_S)
    assert (ended["returncode"], ended["stoppedBy"], ended["processes"]) == (
        -signal.SIGKILL,
        "sigkill",
        5,
    )


@NODES
async def test_a_daemon_left_by_a_finished_remote_child_is_ended(
    bridge: RayBridge, two_nodes: TwoNodes, marker: str, node: str
) -> None:
    script = "setsid sh -c 'trap \"\" TERM; exec sleep 300' </dev/null >/dev/null 2>&1 & exit 0"
    child = await bridge.start(
        ["sh", "-c", script],
        cwd="/",
        env=env_of(marker),
        grace_s=0.3,
        sink=Collected(),
        placement=Placement(resources={node: 1}),
    )
    assert child.started.result()["node"] == two_nodes.node_of(node)
    ended = await asyncio.wait_for(child.ended, EXIT_TIMEOUT_S)
    assert (ended["returncode"], ended["leftovers"]) == (0, 1)


@NODES
async def test_an_actor_killed_through_ray_loses_its_child_and_leaves_nothing_of_its_tree(
    bridge: RayBridge, two_nodes: TwoNodes, marker: str, node: str
) -> None:
    child, _ = await started_with_daemon(bridge, marker, node)
    killer = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        KILL_ACTOR,
        two_nodes.address,
        NAMESPACE,
        child.started.result()["actor"],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(killer.communicate(), EXIT_TIMEOUT_S)
    assert killer.returncode == 0, err.decode()
    assert (await lost(child)).reason == "node-lost"


@NODES
async def test_a_worker_killed_with_sigkill_loses_the_child_and_leaves_nothing_of_its_tree(
    bridge: RayBridge, marker: str, node: str
) -> None:
    child, _ = await started_with_daemon(bridge, marker, node)
    os.kill(child.started.result()["worker"], signal.SIGKILL)  # the actor's worker, by pid
    assert (await lost(child)).reason == "node-lost"


async def test_a_node_removed_mid_run_loses_its_child_and_leaves_nothing_of_its_tree(
    bridge: RayBridge, two_nodes: TwoNodes, marker: str
) -> None:
    async with third_node(two_nodes, "third") as third:
        child, _ = await started_with_daemon(bridge, marker, "third")
        assert child.started.result()["node"] == third.node_id
    assert (await lost(child)).reason == "node-lost"
