"""A started child is one handle (`ChildHandle`): its facts, its `wait` and its `stop`.

The local executor's handle on this machine's real processes; the remote one is
driven the same way by the child runner in tests/e2e/test_ray_executor.py. And a
child's placement reaches the bridge as the JSON it always read.
"""

from __future__ import annotations

import asyncio
import json
import signal

from subagent_host.backends.exits import StoppedBy
from subagent_host.backends.supervisor import RUN_MARKER, LaunchSpec, StopStep, Supervisor
from subagent_host.executors.base import ChildHandle
from subagent_host.executors.bridge import placement_message, placement_of
from subagent_host.executors.local import LocalExecutor
from subagent_host.values.placement import Placement
from tests.raycluster import EXIT_TIMEOUT_S, Collected, env_of

# The child and the sleep it starts both ignore SIGTERM: only the SIGKILL ends them.
STUBBORN = "trap '' TERM; sleep 60 & echo ready; wait"


async def test_a_local_child_s_handle_ends_its_whole_tree_and_then_tells_its_exit(
    marker: str,
) -> None:
    supervisor = Supervisor()
    try:
        sink = Collected()
        handle: ChildHandle = await LocalExecutor(supervisor).start(
            LaunchSpec(
                argv=("sh", "-c", STUBBORN),
                cwd="/",
                env={**env_of(marker), RUN_MARKER: marker},
                log_fields={"runId": "r"},
            ),
            sink,
        )
        await sink.until(b"ready\n")
        assert (handle.pgid, handle.node, handle.returncode) == (handle.pid, None, None)
        assert handle.log_fields == {"runId": "r", "pid": handle.pid}
        assert not handle.exited.done()

        report = await asyncio.wait_for(handle.stop(grace_s=0.3), EXIT_TIMEOUT_S)
        exit_ = await asyncio.wait_for(handle.wait(), EXIT_TIMEOUT_S)

        assert report.step is StopStep.SIGKILL, report
        assert exit_.signal == signal.SIGKILL and exit_.exit_code is None, exit_
        assert handle.stopped_by is StoppedBy.SIGKILL
        assert handle.returncode == -signal.SIGKILL
        assert handle.leftovers_ended >= 1  # the sleep
        assert handle.usage is not None
    finally:
        supervisor.close()


async def test_a_local_child_that_exits_by_itself_is_waited_for_through_its_handle(
    marker: str,
) -> None:
    supervisor = Supervisor()
    try:
        sink = Collected()
        handle = await LocalExecutor(supervisor).start(
            LaunchSpec(argv=("sh", "-c", "echo out; exit 4"), cwd="/", env=env_of(marker)),
            sink,
        )
        told: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        handle.on_exit(lambda: told.set_result(None))
        exit_ = await asyncio.wait_for(handle.wait(), EXIT_TIMEOUT_S)
        assert told.done() and exit_.exit_code == 4 and exit_.signal is None
        assert (handle.stopped_by, handle.leftovers_ended) == (StoppedBy.EXIT, 0)
        assert bytes(sink.stdout) == b"out\n"
    finally:
        supervisor.close()


def test_a_placement_reaches_the_bridge_by_its_wire_names_and_is_read_back_whole() -> None:
    placed = Placement(resources={"gpu": 1.0}, node_id="abc", labels={"zone": "a"})
    message = placement_message(placed)
    assert message == {"resources": {"gpu": 1.0}, "nodeId": "abc", "labels": {"zone": "a"}}
    assert placement_of(json.loads(json.dumps(message))) == placed
    assert placement_message(Placement(node_id="abc")) == {"nodeId": "abc"}  # unset: left out
    assert placement_of(None) == Placement()
