"""The Ray bridge and its actors against a local two-node cluster (`ray.cluster_utils`).

Each child runs in an actor of its own under the shim; the tests prove that its
output and exit come back, that placement picks the node, and that nothing of a
remote tree survives a stop, a killed worker or the bridge's death. Every test
ends with a sweep of the machine (both nodes run here) for the run marker.
Skipped when the `ray` extra is not installed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from subagent_host.backends.supervisor import Supervisor  # noqa: E402
from subagent_host.executors.bridge import (  # noqa: E402
    ClusterUnreachable,
    RayBridge,
    RemoteFailure,
)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

FAKES = Path(__file__).parent.parent / "fakes"
MARKER = "SUBAGENT_HOST_RAY_TEST"
EXIT_TIMEOUT_S = 60.0
CLUSTER_ENVIRONMENT = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


class Collected:
    """An output sink that keeps what came."""

    def __init__(self) -> None:
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.grew = asyncio.Event()

    def on_stdout(self, data: bytes) -> None:
        self.stdout += data
        self.grew.set()

    def on_stderr(self, data: bytes) -> None:
        self.stderr += data

    async def until(self, text: bytes) -> None:
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while text not in self.stdout:
                self.grew.clear()
                await self.grew.wait()


class TwoNodes:
    def __init__(self, cluster: Cluster, head: str, worker: str, startup_s: float) -> None:
        self.cluster = cluster
        self.head = head
        self.worker = worker
        self.startup_s = startup_s


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[TwoNodes]:
    # Unix socket paths are limited to 107 bytes: a short temporary directory.
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    environment = {**CLUSTER_ENVIRONMENT, "RAY_TMPDIR": temp_dir}
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    began = time.monotonic()
    cluster = None
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "resources": {"head": 1}},
        )
        worker = cluster.add_node(num_cpus=1, resources={"worker": 1})
        cluster.wait_for_nodes()
        startup_s = time.monotonic() - began
        yield TwoNodes(cluster, cluster.head_node.node_id, worker.node_id, startup_s)
    finally:
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def marked(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARKER) == marker and process.status() != "zombie":
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


async def none_left(marker: str) -> None:
    """Wait (bounded) until no process carries the marker: the remote trees are gone."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + EXIT_TIMEOUT_S
    while left := await asyncio.to_thread(marked, marker):
        assert loop.time() < deadline, f"left behind: {left}"
        await asyncio.sleep(0.1)  # other processes' ends: nothing of ours to await


@pytest.fixture
async def marker() -> AsyncIterator[str]:
    value = uuid.uuid4().hex
    yield value
    await none_left(value)


@pytest.fixture
async def supervisor() -> AsyncIterator[Supervisor]:
    """The server's side: the bridge is its child, as any other."""
    made = Supervisor()
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
async def bridge(two_nodes: TwoNodes, supervisor: Supervisor) -> AsyncIterator[RayBridge]:
    opened = await RayBridge.open(
        supervisor, address=two_nodes.cluster.address, namespace="tests", env=dict(os.environ)
    )
    try:
        yield opened
    finally:
        await opened.close()


def env_of(marker: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], MARKER: marker}


async def test_a_child_runs_on_the_node_its_placement_asks_for_and_its_output_comes_back(
    bridge: RayBridge, two_nodes: TwoNodes, marker: str
) -> None:
    for placement, node in (
        ({"resources": {"worker": 1}}, two_nodes.worker),
        ({"nodeId": two_nodes.head}, two_nodes.head),
    ):
        sink = Collected()
        child = await bridge.start(
            ["sh", "-c", "echo hello; echo oops >&2; exit 3"],
            cwd="/",
            env=env_of(marker),
            grace_s=1.0,
            sink=sink,
            placement=placement,
        )
        assert child.started.result()["node"] == node
        ended = await asyncio.wait_for(child.ended, EXIT_TIMEOUT_S)
        assert (ended["returncode"], ended["stoppedBy"], ended["leftovers"]) == (3, None, 0)
        assert (bytes(sink.stdout), bytes(sink.stderr)) == (b"hello\n", b"oops\n")


async def test_a_child_gets_its_stdin_and_exactly_its_environment(
    bridge: RayBridge, marker: str
) -> None:
    sink = Collected()
    child = await bridge.start(
        ["sh", "-c", "cat; echo; env"],
        cwd="/",
        env=env_of(marker),
        grace_s=1.0,
        sink=sink,
        stdin="the prompt",
    )
    await asyncio.wait_for(child.ended, EXIT_TIMEOUT_S)
    first, *variables = sink.stdout.decode().splitlines()
    assert first == "the prompt"
    assert not [line for line in variables if line.startswith(("RAY_", "PYTHONPATH="))]


async def test_stop_ends_a_remote_tree_that_ignores_sigterm_with_sigkill(
    bridge: RayBridge, marker: str
) -> None:
    sink = Collected()
    child = await bridge.start(
        [sys.executable, str(FAKES / "tree.py"), "5", "--ignore-term"],
        cwd="/",
        env=env_of(marker),
        grace_s=0.5,
        sink=sink,
        placement={"resources": {"worker": 1}},
    )
    await sink.until(b"ready\n")
    assert len(await asyncio.to_thread(marked, marker)) == 5
    child.stop(0.5)
    ended = await asyncio.wait_for(child.ended, EXIT_TIMEOUT_S)
    assert (ended["returncode"], ended["stoppedBy"]) == (-signal.SIGKILL, "sigkill")


async def test_a_daemon_left_by_a_finished_remote_child_is_ended(
    bridge: RayBridge, marker: str
) -> None:
    script = "setsid sh -c 'trap \"\" TERM; exec sleep 300' </dev/null >/dev/null 2>&1 & exit 0"
    child = await bridge.start(
        ["sh", "-c", script], cwd="/", env=env_of(marker), grace_s=0.3, sink=Collected()
    )
    ended = await asyncio.wait_for(child.ended, EXIT_TIMEOUT_S)
    assert (ended["returncode"], ended["leftovers"]) == (0, 1)


async def test_a_placement_no_node_can_hold_fails_after_a_bounded_wait(
    bridge: RayBridge, marker: str
) -> None:
    with pytest.raises(RemoteFailure) as failed:
        await bridge.start(
            ["true"],
            cwd="/",
            env=env_of(marker),
            grace_s=1.0,
            sink=Collected(),
            placement={"resources": {"gpu": 1}},
            placement_timeout_s=2.0,
        )
    assert failed.value.reason == "unplaceable"
    assert '"gpu": 1' in str(failed.value)


async def test_a_program_that_cannot_start_remotely_is_spawn_failed(
    bridge: RayBridge, marker: str
) -> None:
    with pytest.raises(RemoteFailure) as failed:
        await bridge.start(
            ["/nonexistent/program"], cwd="/", env=env_of(marker), grace_s=1.0, sink=Collected()
        )
    assert failed.value.reason == "spawn-failed"


async def test_a_worker_killed_with_sigkill_loses_the_child_and_leaves_nothing_of_its_tree(
    bridge: RayBridge, marker: str
) -> None:
    sink = Collected()
    child = await bridge.start(
        ["sh", "-c", "setsid sleep 300 & echo ready; exec sleep 300"],
        cwd="/",
        env=env_of(marker),
        grace_s=0.5,
        sink=sink,
        placement={"resources": {"worker": 1}},
    )
    await sink.until(b"ready\n")
    os.kill(child.started.result()["worker"], signal.SIGKILL)  # the actor's worker, by pid
    with pytest.raises(RemoteFailure) as failed:
        await asyncio.wait_for(child.ended, EXIT_TIMEOUT_S)
    assert failed.value.reason == "node-lost"
    await none_left(marker)


async def test_the_bridge_s_death_ends_every_remote_tree(
    two_nodes: TwoNodes, supervisor: Supervisor, marker: str
) -> None:
    bridge = await RayBridge.open(
        supervisor, address=two_nodes.cluster.address, namespace="tests", env=dict(os.environ)
    )
    children: list[Any] = []
    for node in ("head", "worker"):
        sink = Collected()
        children.append(
            await bridge.start(
                ["sh", "-c", "setsid sleep 300 & echo ready; exec sleep 300"],
                cwd="/",
                env=env_of(marker),
                grace_s=0.5,
                sink=sink,
                placement={"resources": {node: 1}},
            )
        )
        await sink.until(b"ready\n")
    os.kill(bridge.pid, signal.SIGKILL)  # the driver, by pid
    for child in children:
        with pytest.raises(RemoteFailure):
            await asyncio.wait_for(child.ended, EXIT_TIMEOUT_S)
    await bridge.close()
    await none_left(marker)


async def test_an_unreachable_cluster_is_refused_when_the_bridge_starts(
    supervisor: Supervisor,
) -> None:
    with pytest.raises(ClusterUnreachable) as refused:
        await RayBridge.open(
            supervisor, address="127.0.0.1:9", namespace=None, env=dict(os.environ)
        )
    assert "the head at 127.0.0.1:9 does not answer" in str(refused.value)


def test_the_two_node_cluster_started_in_a_bounded_time(two_nodes: TwoNodes) -> None:
    print(f"two-node cluster started in {two_nodes.startup_s:.1f} s")
    assert two_nodes.startup_s < 120
