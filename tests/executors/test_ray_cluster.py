"""The Ray bridge and its actors against a local two-node cluster (`ray.cluster_utils`).

Each child runs in an actor of its own under the shim; the tests prove that its
output and exit come back, that placement picks the node, that a held child's
output waits, and that nothing of a remote tree survives the bridge's death (the
other survivor cases, per node: test_ray_survivors.py). Every test
ends with a sweep of the machine (both nodes run here) for the run marker.
Skipped when the `ray` extra is not installed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

from subagent_host.backends.supervisor import Supervisor  # noqa: E402
from subagent_host.executors.bridge import (  # noqa: E402
    ClusterUnreachable,
    RayBridge,
    RemoteFailure,
)
from subagent_host.executors.ray_actor import CHUNK_BYTES  # noqa: E402
from subagent_host.values.placement import Placement  # noqa: E402
from tests.raycluster import (  # noqa: E402
    EXIT_TIMEOUT_S,
    Collected,
    TwoNodes,
    env_of,
    none_left,
    open_bridge,
)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

FAKES = Path(__file__).parent.parent / "fakes"


async def test_a_child_runs_on_the_node_its_placement_asks_for_and_its_output_comes_back(
    bridge: RayBridge, two_nodes: TwoNodes, marker: str
) -> None:
    for placement, node in (
        (Placement(resources={"worker": 1}), two_nodes.worker),
        (Placement(node_id=two_nodes.head), two_nodes.head),
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
        assert ended["processes"] == 1 and ended["peakRssBytes"] > 0, ended
        assert ended["cpuSeconds"] >= 0, ended
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


async def test_children_without_a_placement_take_warm_actors_and_each_one_serves_the_next(
    bridge: RayBridge, marker: str
) -> None:
    workers = []
    for round_ in range(4):
        sink = Collected()
        child = await bridge.start(
            ["sh", "-c", f"setsid sleep 300 & echo round {round_}"],
            cwd="/",
            env=env_of(marker),
            grace_s=0.5,
            sink=sink,
        )
        ended = await asyncio.wait_for(child.ended, EXIT_TIMEOUT_S)
        assert ended["returncode"] == 0 and ended["leftovers"] == 1, ended
        assert sink.stdout == f"round {round_}\n".encode()
        workers.append(child.started.result()["worker"])
        await none_left(marker)  # its daemon went with it, before its actor served again
    # After the first, each child ran in a worker that was already up: an actor that
    # served a child whose tree was gone took the next one.
    assert len(set(workers[1:])) < len(workers[1:]), workers


async def test_output_comes_back_byte_for_byte_whatever_its_bytes(
    bridge: RayBridge, marker: str
) -> None:
    # Every byte value, newlines and NULs among them, in writes of odd sizes.
    program = (
        "import sys\n"
        "data = bytes(range(256)) * 4099\n"
        "for at in range(0, len(data), 70001):\n"
        "    sys.stdout.buffer.write(data[at:at + 70001]); sys.stdout.buffer.flush()\n"
        "sys.stderr.buffer.write(b'\\x00err\\n')\n"
    )
    sink = Collected()
    child = await bridge.start(
        [sys.executable, "-c", program], cwd="/", env=env_of(marker), grace_s=0.5, sink=sink
    )
    ended = await asyncio.wait_for(child.ended, EXIT_TIMEOUT_S)
    assert ended["returncode"] == 0, ended
    assert bytes(sink.stdout) == bytes(range(256)) * 4099
    assert bytes(sink.stderr) == b"\x00err\n"


def _read_or_gone(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:  # the process is gone
        return ""


async def blocked_on_write(pid: int) -> None:
    """Wait (bounded) until the process sleeps in a write to a full pipe."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + EXIT_TIMEOUT_S
    wchan = Path(f"/proc/{pid}/wchan")
    while not (await asyncio.to_thread(_read_or_gone, wchan)).endswith("pipe_write"):
        assert wchan.parent.exists(), "the child ran to its end: its output was not held"
        assert loop.time() < deadline, "the child never blocked on its output"
        await asyncio.sleep(0.05)  # a process's kernel state: nothing to await


async def test_a_held_child_blocks_on_write_while_others_flow_and_its_output_arrives_whole(
    bridge: RayBridge, marker: str, tmp_path: Path
) -> None:
    lines = 1_000_000
    flood = f"import sys; sys.stdout.buffer.write(b''.join(b'%08d\\n' % i for i in range({lines})))"
    go = tmp_path / "go"
    script = f'echo ready; while [ ! -e {go} ]; do sleep 0.02; done; exec {sys.executable} -c "$0"'
    held_sink = Collected()
    held = await bridge.start(
        ["sh", "-c", script, flood],
        cwd="/",
        env=env_of(marker),
        grace_s=1.0,
        sink=held_sink,
        placement=Placement(resources={"worker": 1}),
    )
    await held_sink.until(b"ready\n")
    held.hold_output()
    # The bridge reads its input in order: once the next child started, the hold is in
    # effect, and of what the held child writes after it, at most the one chunk the
    # bridge was already waiting for comes through.
    other_sink = Collected()
    other = await bridge.start(
        ["seq", "1", "20000"], cwd="/", env=env_of(marker), grace_s=1.0, sink=other_sink
    )
    await asyncio.to_thread(go.touch)
    most = len(b"ready\n") + CHUNK_BYTES
    await blocked_on_write(held.started.result()["pid"])
    # The others flow on meanwhile, whole.
    assert (await asyncio.wait_for(other.ended, EXIT_TIMEOUT_S))["returncode"] == 0
    assert other_sink.stdout.decode().split() == [str(i) for i in range(1, 20001)]
    # Holding still: no absence of progress can be awaited, so it is watched for a while.
    await asyncio.sleep(1.0)
    assert not held.ended.done()
    assert len(held_sink.stdout) <= most, len(held_sink.stdout)
    held.release_output()
    ended = await asyncio.wait_for(held.ended, EXIT_TIMEOUT_S)
    assert (ended["returncode"], ended["stoppedBy"]) == (0, None)
    assert held_sink.stdout == b"ready\n" + b"".join(b"%08d\n" % i for i in range(lines))


async def test_a_held_child_that_is_stopped_ends_without_its_output_being_taken(
    bridge: RayBridge, marker: str
) -> None:
    sink = Collected()
    held = await bridge.start(
        ["sh", "-c", "echo ready; exec yes"],
        cwd="/",
        env=env_of(marker),
        grace_s=1.0,
        sink=sink,
        placement=Placement(resources={"worker": 1}),
    )
    await sink.until(b"ready\n")
    held.hold_output()
    await blocked_on_write(held.started.result()["pid"])
    held.stop(grace_s=1.0)
    # Its tree is gone: its exit is reported although its output is still held, after
    # the rest of that output (what was ahead and in its pipes), in order.
    ended = await asyncio.wait_for(held.ended, EXIT_TIMEOUT_S)
    assert (ended["returncode"], ended["stoppedBy"]) == (-signal.SIGTERM, "sigterm")
    rest = bytes(sink.stdout)[len(b"ready\n") :]
    assert sink.stdout.startswith(b"ready\n") and rest == (b"y\n" * len(rest))[: len(rest)]


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
            placement=Placement(resources={"gpu": 1}),
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


async def test_the_bridge_s_death_ends_every_remote_tree(
    two_nodes: TwoNodes, supervisor: Supervisor, marker: str
) -> None:
    bridge = await open_bridge(two_nodes, supervisor)
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
                placement=Placement(resources={node: 1}),
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
