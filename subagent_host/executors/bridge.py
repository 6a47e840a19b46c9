"""The server's side of the Ray bridge (ray_bridge.py): start it, send it children, hear back.

Nothing here imports Ray: the bridge process is the Ray driver, and this module
speaks NDJSON with it over its stdin and stdout. Closing its stdin (or the
server's death, which closes it) ends the bridge, its actors and, through each
child's shim, every remote tree.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import attrs

from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.supervisor import LaunchSpec, Supervisor
from subagent_host.executors.local import LocalExecutor, LocalHandle
from subagent_host.values.placement import Placement
from subagent_host.values.wire_names import wire_name

# How long joining a cluster may take (Ray's own connection attempts are within it).
BRIDGE_START_TIMEOUT_S: Final = 60.0
# How long the bridge may take to end its actors and leave the cluster.
BRIDGE_EXIT_TIMEOUT_S: Final = 30.0
# How long a child may wait for a node that can hold its placement before it fails.
PLACEMENT_TIMEOUT_S: Final = 60.0
# Lines of the bridge's stderr (Ray's logs) kept to explain a failure, and how much of each.
STDERR_LINES_KEPT: Final = 50
STDERR_LINE_BYTES: Final = 2000
# The grace of the stop sequence for a bridge that did not exit when told to.
BRIDGE_KILL_GRACE_S: Final = 2.0
# Why a remote child failed (the failed child's error code).
UNPLACEABLE: Final = "unplaceable"
NODE_LOST: Final = "node-lost"
SPAWN_FAILED: Final = "spawn-failed"
# What the bridge's environment adds: Ray must not phone home from a server.
BRIDGE_ENVIRONMENT: Final = {"RAY_USAGE_STATS_ENABLED": "0"}


def placement_message(placement: Placement) -> dict[str, object]:
    """A placement as the bridge reads it (`placement_of`): its members by their wire
    names (protocol.md §8.8), those not set left out."""
    members = (
        (wire_name(field), getattr(placement, field.name)) for field in attrs.fields(Placement)
    )
    return {name: value for name, value in members if value is not None}


def placement_of(message: Mapping[str, Any] | None) -> Placement:
    """The placement a `placement_message` carried (None: an empty one, which places
    nothing)."""
    names = {wire_name(field): field.name for field in attrs.fields(Placement)}
    return Placement(**{names[key]: value for key, value in (message or {}).items()})


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
        self._ends: dict[int, asyncio.Future[int]] = {}
        """`end_descendants` not answered yet, by their number."""
        self._next_end = 0
        self.ended.add_done_callback(self._answer_ends)

    def write_input(self, data: bytes) -> None:
        """Write to its stdin (kept open), after whatever was written before; nothing once
        it ended (the bridge drops what it is told about a child it no longer holds)."""
        if data and not self.ended.done():
            self._bridge.send({"op": "input", "id": self.child_id, "bytes": len(data)}, data)

    def close_input(self) -> None:
        """Close its stdin, once what was written before reached it."""
        if not self.ended.done():
            self._bridge.send({"op": "close-input", "id": self.child_id})

    def signal_group(self, signum: int) -> None:
        """Send `signum` to its process group on its node, after what was written before."""
        if not self.ended.done():
            self._bridge.send({"op": "signal", "id": self.child_id, "signal": int(signum)})

    async def end_descendants(self, grace_s: float, age_ticks: int | None) -> int:
        """End what it left running (with `age_ticks`, only what started at most that many
        clock ticks before its node reads its clock); how many processes (0: it ended
        meanwhile)."""
        if self.ended.done():
            return 0
        self._next_end += 1
        answered: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._ends[self._next_end] = answered
        message = {"op": "end-descendants", "id": self.child_id, "req": self._next_end}
        self._bridge.send({**message, "graceS": grace_s, "ageTicks": age_ticks})
        return await answered

    def descendants_ended(self, req: int, count: int) -> None:
        if (answered := self._ends.pop(req, None)) is not None and not answered.done():
            answered.set_result(count)

    def _answer_ends(self, _: object) -> None:
        """Its end (or its loss) answers what was not: its tree is ended with it."""
        ends, self._ends = self._ends, {}
        for answered in ends.values():
            if not answered.done():
                answered.set_result(0)

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


class _BridgeOutput:
    """The bridge's stdout, split into protocol lines, and the tail of its stderr."""

    def __init__(self) -> None:
        self._partial = bytearray()
        self.first: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        """The bridge's first line: `ready` once it joined the cluster, else why not."""
        self.dispatch: Callable[[dict[str, Any], bytes], None] | None = None
        self._awaited: tuple[dict[str, Any], int] | None = None
        """An output's line, and how many bytes of it are still to come."""
        self.stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES_KEPT)
        self._stderr_partial = bytearray()

    def on_stdout(self, data: bytes) -> None:
        self._partial += data
        while True:
            if self._awaited is not None:  # an output's bytes follow its line
                message, size = self._awaited
                if len(self._partial) < size:
                    return
                payload = bytes(self._partial[:size])
                del self._partial[:size]
                self._awaited = None
                if self.dispatch is not None:
                    self.dispatch(message, payload)
                continue
            end = self._partial.find(b"\n")
            if end < 0:
                return
            line = bytes(self._partial[:end])
            del self._partial[: end + 1]
            if not self.first.done():
                self.first.set_result(line)
                continue
            message = json.loads(line)  # the bridge writes nothing else there
            if "bytes" in message:
                self._awaited = (message, int(message["bytes"]))
            elif self.dispatch is not None:
                self.dispatch(message, b"")

    def on_stderr(self, data: bytes) -> None:
        self._stderr_partial += data
        *lines, rest = self._stderr_partial.split(b"\n")
        self._stderr_partial = bytearray(rest[-STDERR_LINE_BYTES:])
        self.stderr.extend(line.decode("utf-8", "replace")[:STDERR_LINE_BYTES] for line in lines)


class RayBridge:
    """A running bridge: one per server, holding every remote child of it.

    It is a child of the server's supervisor like any other (its own session and
    cgroup, its tree ended by the stop sequence), started with its stdin kept
    open: that pipe carries the commands, and its end ends the bridge.
    """

    def __init__(self, process: LocalHandle, output: _BridgeOutput) -> None:
        self._process = process
        """The bridge process, a child of this machine's like any other."""
        self._output = output
        self.node: str = ""
        """The node the bridge (the driver) runs on."""
        self._children: dict[int, RemoteChild] = {}
        self._next_id = 0
        self.ended: asyncio.Task[ProcessExit] = asyncio.create_task(self._watch())
        """Done once the bridge has exited (its children are then lost)."""

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return not self.ended.done()

    @classmethod
    async def open(
        cls,
        supervisor: Supervisor,
        *,
        address: str | None,
        namespace: str | None,
        env: Mapping[str, str],
    ) -> RayBridge:
        """Start the bridge and wait until it joined the cluster. ClusterUnreachable."""
        argv = [sys.executable, "-m", "subagent_host.executors.ray_bridge"]
        argv += ["--address", address or "auto"]
        if namespace is not None:
            argv += ["--namespace", namespace]
        output = _BridgeOutput()
        try:
            process = await LocalExecutor(supervisor).start(
                LaunchSpec(
                    argv=tuple(argv),
                    cwd=os.getcwd(),
                    env={**env, **BRIDGE_ENVIRONMENT},
                    keep_stdin=True,
                    name="ray-bridge",
                    log_fields={"executor": "ray"},
                ),
                output,
            )
        except OSError as exc:
            raise ClusterUnreachable(f"cannot start the Ray bridge: {exc}") from None
        bridge = cls(process, output)
        try:
            async with asyncio.timeout(BRIDGE_START_TIMEOUT_S):
                either: list[asyncio.Future[Any]] = [output.first, bridge.ended]
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            await bridge.close(grace_s=0)
            raise ClusterUnreachable(
                f"the Ray bridge did not join the cluster within {BRIDGE_START_TIMEOUT_S:g} s"
            ) from None
        line = output.first.result() if output.first.done() else b""
        first = json.loads(line) if line else {"event": "unreachable", "message": ""}
        if first["event"] != "ready":
            await bridge.close()
            said = first.get("message") or " / ".join(output.stderr) or "the bridge exited"
            raise ClusterUnreachable(f"cannot join the Ray cluster: {said}")
        bridge.node = first["node"]
        output.dispatch = bridge._dispatch
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
        keep_stdin: bool = False,
        placement: Placement | None = None,
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
                "keepStdin": keep_stdin,
                "graceS": grace_s,
                "placement": placement_message(placement) if placement is not None else None,
                "placementTimeoutS": placement_timeout_s,
            }
        )
        try:
            await child.started
        except asyncio.CancelledError:
            # Called off before it ran (its run was stopped while it waited for a node):
            # the bridge drops it wherever it is, and its shim ends whatever it started.
            self._children.pop(child.child_id, None)
            self.send({"op": "cancel", "id": child.child_id})
            raise
        return child

    def send(self, message: dict[str, Any], payload: bytes = b"") -> None:
        """One command; `payload` (an input's bytes) right after its line, as they are. The
        pipe takes them in order and never blocks: what it cannot take yet waits here."""
        if (commands := self._process.child.input) is not None:
            commands.send(json.dumps(message).encode() + b"\n" + payload)

    async def _watch(self) -> ProcessExit:
        """Wait for the bridge's end; every child it still held is lost with it."""
        try:
            return await self._process.wait()
        finally:
            lost = RemoteFailure(NODE_LOST, "the Ray bridge (the cluster's driver) exited")
            for child in self._children.values():
                child.fail(lost)
            self._children.clear()

    def _dispatch(self, message: dict[str, Any], payload: bytes) -> None:
        child = self._children.get(message.get("id", -1))
        if child is None:
            return
        event = message["event"]
        if event == "started":
            child.started.set_result(message)
        elif event == "output":
            sink = child.sink.on_stdout if message["stream"] == "stdout" else child.sink.on_stderr
            sink(payload)
        elif event == "descendants-ended":
            child.descendants_ended(int(message["req"]), int(message["count"]))
        elif event == "exit":
            child.ended.set_result(message)
            del self._children[child.child_id]
        elif event == "failed":
            child.fail(RemoteFailure(message["reason"], message["message"]))
            del self._children[child.child_id]

    async def close(self, grace_s: float = BRIDGE_EXIT_TIMEOUT_S) -> None:
        """End the bridge: its actors are killed and their shims end the trees."""
        if (commands := self._process.child.input) is not None:
            commands.close()
        try:
            await asyncio.wait_for(asyncio.shield(self.ended), grace_s)
        except TimeoutError:
            # Its tree (the driver and what Ray started in it) gets the stop sequence.
            await self._process.stop(grace_s=BRIDGE_KILL_GRACE_S)
            await asyncio.wait_for(asyncio.shield(self.ended), BRIDGE_EXIT_TIMEOUT_S)
