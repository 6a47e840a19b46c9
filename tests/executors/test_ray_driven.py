"""A driven child on a cluster node: its stdin kept open, its group signalled, what it
left running ended, through the handle the child runner talks to (`RemoteHandle`).

The child is tests/fakes/talker.py on the module's second node (or a third one,
removed under it), reached as the server reaches it: host -> bridge -> actor ->
shim -> child. Every test ends with the marker sweep of the machine, which holds
every node. Skipped when the `ray` extra is not installed.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import psutil
import pytest

pytest.importorskip("ray")

from subagent_host.backends.cgroups import ticks_now  # noqa: E402
from subagent_host.executors.base import ChildLost  # noqa: E402
from subagent_host.executors.bridge import RayBridge  # noqa: E402
from subagent_host.executors.ray_executor import RemoteHandle  # noqa: E402
from subagent_host.values.placement import Placement  # noqa: E402
from tests.raycluster import (  # noqa: E402
    EXIT_TIMEOUT_S,
    WORKER_RESOURCE,
    Collected,
    TwoNodes,
    env_of,
    later_than,
    later_than_ticks,
    third_node,
)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

# How long after the mark the new helper is started (clock ticks: 1/100 s).
SPAWN_AFTER_TICKS = 50
TALKER = str(Path(__file__).parent.parent / "fakes" / "talker.py")


async def talker(bridge: RayBridge, marker: str, resource: str) -> tuple[RemoteHandle, Collected]:
    """The talker, its stdin kept open, on the node that offers `resource`, once ready."""
    sink = Collected()
    remote = await bridge.start(
        [sys.executable, TALKER],
        cwd="/",
        env=env_of(marker),
        grace_s=0.3,
        sink=sink,
        keep_stdin=True,
        placement=Placement(resources={resource: 1}),
    )
    handle = RemoteHandle(remote, remote.started.result(), {"runId": marker})
    await sink.until(b"ready ")
    await sink.until(b"\n")
    return handle, sink


def number_after(sink: Collected, word: bytes) -> int:
    """The number printed after `word` (`ready PID`, `spawned PID`)."""
    line = next(line for line in bytes(sink.stdout).splitlines() if line.startswith(word))
    return int(line.split()[1])


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_a_remote_child_reads_its_input_in_order_hears_a_signal_and_ends_at_its_end(
    bridge: RayBridge, two_nodes: TwoNodes, marker: str
) -> None:
    handle, sink = await talker(bridge, marker, WORKER_RESOURCE)
    assert handle.node == two_nodes.worker
    # Many small writes in a row, none awaited: they arrive whole and in order.
    words = [f"word{i}" for i in range(200)]
    for word in words:
        handle.write_input(word.encode() + b"\n")
    await sink.until(b"got word199\n")
    answers = [line for line in bytes(sink.stdout).splitlines() if line.startswith(b"got ")]
    assert answers == [f"got {word}".encode() for word in words]
    # A Ctrl-C to its group on its node, after what was written before it.
    handle.write_input(b"before\n")
    handle.signal_group(signal.SIGINT)
    await sink.until(b"interrupted\n")
    await sink.until(b"got before\n")  # (read when it reads: before or after the signal)
    assert not handle.exited.done()
    # Its input's end ends it; what it left running (its helper) goes with it.
    handle.write_input(b"last\n")
    handle.close_input()
    exit_ = await asyncio.wait_for(handle.wait(), EXIT_TIMEOUT_S)
    assert exit_.exit_code == 0 and b"got last\n" in sink.stdout
    assert handle.leftovers_ended == 1
    handle.write_input(b"to nobody\n")  # once it ended: nothing, and no error
    handle.signal_group(signal.SIGINT)
    handle.close_input()
    assert await handle.end_descendants(0.3, None) == 0


async def test_what_a_remote_child_started_since_a_tick_is_ended_and_nothing_older(
    bridge: RayBridge, marker: str
) -> None:
    handle, sink = await talker(bridge, marker, WORKER_RESOURCE)
    old = number_after(sink, b"ready")
    since = await later_than(old)  # this machine's ticks (both nodes run here)
    # The mark goes to the node as an age, which errs late by the request's way there:
    # the new helper starts a good while after the mark, well past that.
    await later_than_ticks(since + SPAWN_AFTER_TICKS)
    handle.write_input(b"spawn\n")
    await sink.until(b"spawned ")
    await sink.until(b"\n")
    new = number_after(sink, b"spawned")
    # The new helper ignores SIGTERM: the grace passes, SIGKILL ends it.
    ended = await asyncio.wait_for(handle.end_descendants(0.3, since), EXIT_TIMEOUT_S)
    assert ended == 1 and not running(new) and running(old)
    assert handle.leftovers_ended == 1
    handle.close_input()
    await asyncio.wait_for(handle.wait(), EXIT_TIMEOUT_S)
    assert handle.leftovers_ended == 2  # and the old one, left running at its exit


async def test_a_remote_driven_child_whose_node_is_removed_is_lost_and_talking_to_it_is_harmless(
    bridge: RayBridge, two_nodes: TwoNodes, marker: str
) -> None:
    async with third_node(two_nodes, "third"):
        handle, sink = await talker(bridge, marker, "third")
        handle.write_input(b"hello\n")
        await sink.until(b"got hello\n")
    with pytest.raises(ChildLost) as lost:
        await asyncio.wait_for(handle.wait(), EXIT_TIMEOUT_S)
    assert lost.value.code == "node-lost"
    handle.write_input(b"to nobody\n")
    handle.signal_group(signal.SIGINT)
    handle.close_input()
    assert await handle.end_descendants(0.3, ticks_now()) == 0
