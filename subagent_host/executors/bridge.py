"""The server's side of the Ray bridge (ray_bridge.py): start it, send it children, hear back.

Nothing here imports Ray: the bridge process is the Ray driver, and this module
speaks NDJSON with it over its stdin and stdout. Closing its stdin (or the
server's death, which closes it) ends the bridge, its actors and, through each
child's shim, every remote tree.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

# How long joining a cluster may take (Ray's own connection attempts are within it).
BRIDGE_START_TIMEOUT_S: Final = 60.0
# How long the bridge may take to end its actors and leave the cluster.
BRIDGE_EXIT_TIMEOUT_S: Final = 30.0
# How long a child may wait for a node that can hold its placement before it fails.
PLACEMENT_TIMEOUT_S: Final = 60.0
# Lines of the bridge's stderr (Ray's logs) kept to explain a failure.
STDERR_LINES_KEPT: Final = 50
# What the bridge's environment adds: Ray must not phone home from a server.
BRIDGE_ENVIRONMENT: Final = {"RAY_USAGE_STATS_ENABLED": "0"}


class ClusterUnreachable(Exception):
    """The bridge could not join the cluster (the message says why)."""


class RemoteFailure(Exception):
    """A remote child that did not run or was lost: `reason` is unplaceable, spawn-failed or
    node-lost."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class OutputSink(Protocol):
    def on_stdout(self, data: bytes) -> None: ...

    def on_stderr(self, data: bytes) -> None: ...


class RemoteChild:
    """One child on the cluster, as the bridge reports it."""

    def __init__(self, bridge: RayBridge, child_id: int, sink: OutputSink) -> None:
        loop = asyncio.get_running_loop()
        self._bridge = bridge
        self.child_id = child_id
        self.sink = sink
        self.started: asyncio.Future[dict[str, Any]] = loop.create_future()
        """`{pid, shim, worker, node, actor}` once it runs (`actor`: its actor's name in the
        bridge's namespace); RemoteFailure when it never does."""
        self.ended: asyncio.Future[dict[str, Any]] = loop.create_future()
        """`{returncode, stoppedBy, leftovers, cpuSeconds, peakRssBytes, processes}` (what its
        whole tree used, as its shim counted it); RemoteFailure when its node was lost."""

    def stop(self, grace_s: float) -> None:
        """The stop sequence for its whole tree, carried out by its shim."""
        self._bridge.send({"op": "stop", "id": self.child_id, "graceS": grace_s})

    def hold_output(self) -> None:
        """Take no more of its output for now: its actor stops reading, the child blocks."""
        self._bridge.send({"op": "pause", "id": self.child_id})

    def release_output(self) -> None:
        self._bridge.send({"op": "resume", "id": self.child_id})

    def fail(self, failure: RemoteFailure) -> None:
        for future in (self.started, self.ended):
            if not future.done():
                future.set_exception(failure)
        self.ended.exception()  # read: a child never started is told through `started`


class RayBridge:
    """A running bridge: one per server, holding every remote child of it."""

    def __init__(self, process: asyncio.subprocess.Process, node: str) -> None:
        self._process = process
        self.node: str = node
        """The node the bridge (the driver) runs on."""
        self._children: dict[int, RemoteChild] = {}
        self._next_id = 0
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES_KEPT)
        self._reading: asyncio.Task[None] | None = None
        self._draining: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self._process.pid

    @classmethod
    async def open(
        cls, *, address: str | None, namespace: str | None, env: Mapping[str, str]
    ) -> RayBridge:
        """Start the bridge and wait until it joined the cluster. ClusterUnreachable."""
        argv = [sys.executable, "-m", "subagent_host.executors.ray_bridge"]
        argv += ["--address", address or "auto"]
        if namespace is not None:
            argv += ["--namespace", namespace]
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**env, **BRIDGE_ENVIRONMENT},
            start_new_session=True,  # the server's terminal signals are not the cluster's
            limit=64 * 1024 * 1024,
        )
        bridge = cls(process, "")
        bridge._draining = asyncio.create_task(bridge._drain_stderr())
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), BRIDGE_START_TIMEOUT_S)
        except TimeoutError:
            await bridge.close(grace_s=0)
            raise ClusterUnreachable(
                f"the Ray bridge did not join the cluster within {BRIDGE_START_TIMEOUT_S:g} s"
            ) from None
        first = json.loads(line) if line else {"event": "unreachable", "message": ""}
        if first["event"] != "ready":
            await bridge.close()
            said = first.get("message") or " / ".join(bridge._stderr) or "the bridge exited"
            raise ClusterUnreachable(f"cannot join the Ray cluster: {said}")
        bridge.node = first["node"]
        bridge._reading = asyncio.create_task(bridge._read())
        return bridge

    async def start(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        grace_s: float,
        sink: OutputSink,
        stdin: str | None = None,
        placement: Mapping[str, Any] | None = None,
        placement_timeout_s: float = PLACEMENT_TIMEOUT_S,
    ) -> RemoteChild:
        """Send a child to the cluster and wait until it runs. RemoteFailure."""
        self._next_id += 1
        child = RemoteChild(self, self._next_id, sink)
        self._children[child.child_id] = child
        self.send(
            {
                "op": "start",
                "id": child.child_id,
                "argv": list(argv),
                "cwd": cwd,
                "env": dict(env),
                "stdin": stdin,
                "graceS": grace_s,
                "placement": dict(placement) if placement else None,
                "placementTimeoutS": placement_timeout_s,
            }
        )
        await child.started
        return child

    def send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        if not self._process.stdin.is_closing():
            self._process.stdin.write(json.dumps(message).encode() + b"\n")

    async def _read(self) -> None:
        assert self._process.stdout is not None
        while line := await self._process.stdout.readline():
            self._dispatch(json.loads(line))
        # The bridge is gone: every child it held is lost with it.
        lost = RemoteFailure("node-lost", "the Ray bridge exited")
        for child in self._children.values():
            child.fail(lost)
        self._children.clear()

    def _dispatch(self, message: dict[str, Any]) -> None:
        child = self._children.get(message.get("id", -1))
        if child is None:
            return
        event = message["event"]
        if event == "started":
            child.started.set_result(message)
        elif event == "output":
            data = base64.b64decode(message["data"])
            (child.sink.on_stdout if message["stream"] == "stdout" else child.sink.on_stderr)(data)
        elif event == "exit":
            child.ended.set_result(message)
            del self._children[child.child_id]
        elif event == "failed":
            child.fail(RemoteFailure(message["reason"], message["message"]))
            del self._children[child.child_id]

    async def _drain_stderr(self) -> None:
        assert self._process.stderr is not None
        while line := await self._process.stderr.readline():
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    async def close(self, grace_s: float = BRIDGE_EXIT_TIMEOUT_S) -> None:
        """End the bridge: its actors are killed and their shims end the trees."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), grace_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, 9)  # its own session: the bridge and Ray's helpers
            await self._process.wait()
        for task in (self._reading, self._draining):
            if task is not None:
                await asyncio.wait_for(task, BRIDGE_EXIT_TIMEOUT_S)
