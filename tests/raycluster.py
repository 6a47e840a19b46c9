"""A local two-node Ray cluster for tests, and the sweep that proves nothing of theirs survives.

Any test module may run against a cluster of its own (module-scoped: started once for
the module, ~10 s, shut down after it). tests/executors/conftest.py makes the fixtures
below available there; a module elsewhere imports them from here. Both nodes run on
this machine, so one sweep of its processes for the run marker (`marked`,
`none_left`) covers both. Ray is imported only when a cluster starts: the modules that
need it skip themselves first (`pytest.importorskip("ray")`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
import psutil
import pytest

from subagent_host.backends.cgroups import start_ticks, ticks_now
from subagent_host.backends.supervisor import Supervisor
from subagent_host.executors.bridge import RayBridge

MARKER = "SUBAGENT_HOST_RAY_TEST"
"""The environment variable each test's children carry (its value is the test's own)."""
EXIT_TIMEOUT_S = 60.0
# Ray must not phone home from a test, nor write a token under the user's home.
CLUSTER_ENVIRONMENT = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
NAMESPACE = "tests"
HEAD_RESOURCE = "head"
WORKER_RESOURCE = "worker"


@attrs.frozen
class TwoNodes:
    cluster: Any
    """The `ray.cluster_utils.Cluster` (add and remove nodes through it)."""
    head: str
    """The head node's id."""
    worker: str
    """The second node's id."""
    startup_s: float

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def node_of(self, resource: str) -> str:
        """The id of the node that offers `resource` (`head` or `worker`)."""
        return {HEAD_RESOURCE: self.head, WORKER_RESOURCE: self.worker}[resource]


@contextlib.contextmanager
def cluster_environment() -> Iterator[str]:
    """Ray's environment for a cluster started here, restored afterwards; yields its
    temporary directory (short: Unix socket paths are limited to 107 bytes)."""
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    environment = {**CLUSTER_ENVIRONMENT, "RAY_TMPDIR": temp_dir}
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        yield temp_dir
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def two_node_cluster() -> Iterator[TwoNodes]:
    """A head offering the resource `head` and a second node offering `worker`, one CPU
    each; shut down (every node's processes) on the way out, even when it failed to start."""
    from ray.cluster_utils import Cluster

    with cluster_environment():
        began = time.monotonic()
        cluster = None
        try:
            cluster = Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": 1,
                    "resources": {HEAD_RESOURCE: 1},
                    # No fixed ports (as Ray gives its other nodes): clusters of other
                    # suites or benchmarks on this machine may run meanwhile.
                    "include_dashboard": False,
                    "dashboard_agent_listen_port": None,
                },
            )
            worker = cluster.add_node(num_cpus=1, resources={WORKER_RESOURCE: 1})
            cluster.wait_for_nodes()
            startup_s = time.monotonic() - began
            yield TwoNodes(cluster, cluster.head_node.node_id, worker.node_id, startup_s)
        finally:
            if cluster is not None:
                cluster.shutdown()


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[TwoNodes]:
    """The module's own two-node cluster."""
    with two_node_cluster() as nodes:
        yield nodes


@contextlib.asynccontextmanager
async def third_node(nodes: TwoNodes, resource: str) -> AsyncIterator[Any]:
    """A third node offering `resource`, removed on the way out (its processes with it,
    whatever ran there lost)."""
    # In the main thread (Ray installs signal handlers for it), blocking the loop a moment:
    # nothing of the test runs meanwhile.
    third = nodes.cluster.add_node(num_cpus=1, resources={resource: 1})
    try:
        yield third
    finally:
        await asyncio.to_thread(nodes.cluster.remove_node, third)


async def open_bridge(nodes: TwoNodes, supervisor: Supervisor) -> RayBridge:
    """A bridge (the Ray driver, a child of `supervisor`, as in a server) joined to the cluster."""
    return await RayBridge.open(
        supervisor, address=nodes.address, namespace=NAMESPACE, env=dict(os.environ)
    )


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
    """A bridge for one test, closed after it (its actors and their trees end with it)."""
    opened = await open_bridge(two_nodes, supervisor)
    try:
        yield opened
    finally:
        await opened.close()


def marked(marker: str) -> list[psutil.Process]:
    """Every live process (zombies left out) whose environment carries `marker`."""
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
    """A marker for this test's children; afterwards, none of them may be left."""
    value = uuid.uuid4().hex
    yield value
    await none_left(value)


async def later_than(pid: int) -> int:
    """A start time, in clock ticks since boot, later than `pid`'s, once the clock is
    there: a tick is 1/100 s, and a process started a moment ago may share the tick of
    now. (Both nodes of a test's cluster run here: the ticks are the same on each.)"""
    return await later_than_ticks((start_ticks(pid) or 0) + 1)


async def later_than_ticks(since: int) -> int:
    """`since` (clock ticks since boot), once the clock is there."""
    hertz = os.sysconf("SC_CLK_TCK")
    # The clock's tick: nothing to await but time.
    await asyncio.sleep(max(0.0, since / hertz - time.clock_gettime(time.CLOCK_BOOTTIME)) + 0.001)
    assert ticks_now() >= since
    return since


def env_of(marker: str) -> dict[str, str]:
    """A child's whole environment: PATH and the marker, nothing of Ray's."""
    return {"PATH": os.environ["PATH"], MARKER: marker}


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
        """Wait (bounded) until stdout holds `text`."""
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while text not in self.stdout:
                self.grew.clear()
                await self.grew.wait()
