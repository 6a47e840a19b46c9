"""The cluster executor: children run on the nodes of a Ray cluster, through the bridge.

The server never imports Ray: the bridge (bridge.py, ray_bridge.py) is the Ray
driver, a child of the server's supervisor. This module turns what the bridge
reports into a child's handle (`RemoteHandle`, a `ChildHandle`): the child's
exit, its stop, its usage, and a lost node as a failure with a reason.

The bridge is opened when the server starts and again whenever a launch finds
it gone; a cluster it cannot join makes `preflight`, `spawn` and `resume`
answer -32002 (`unavailable`), never a child stuck in `queued`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from subagent_host.backends.cgroups import ticks_now
from subagent_host.backends.exits import ProcessExit, StoppedBy
from subagent_host.backends.supervisor import (
    KILL_WAIT_S,
    LEFTOVER_GRACE_S,
    LaunchSpec,
    OutputSink,
    StopStep,
    Supervisor,
    TreeStopReport,
    TreeUsage,
)
from subagent_host.executors.base import (
    CLUSTER_UNAVAILABLE,
    ChildLost,
    ExecutorUnavailable,
)
from subagent_host.executors.bridge import (
    PLACEMENT_TIMEOUT_S,
    SPAWN_FAILED,
    ClusterUnreachable,
    RayBridge,
    RemoteChild,
    RemoteFailure,
)
from subagent_host.settings import ExecutorChoice

logger = logging.getLogger(__name__)

# A stop's answer waits for the shim's report at most this much beyond the grace:
# the shim's own SIGKILL wait and a round trip through Ray.
STOP_MARGIN_S: Final = KILL_WAIT_S + 10.0


class RemoteHandle:
    """A child on a node of the cluster, as its supervision sees it (a `ChildHandle`)."""

    def __init__(
        self, remote: RemoteChild, started: Mapping[str, Any], log_fields: Mapping[str, object]
    ) -> None:
        self._remote = remote
        self.pid: int = int(started["pid"])
        """Its pid on its node."""
        self.pgid: int | None = None  # its process group is on another machine
        self.node: str = str(started["node"])
        self.log_fields: Mapping[str, object] = {
            **log_fields,
            "pid": self.pid,
            "node": self.node,
        }
        self.exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.returncode: int | None = None
        self.stopped_by = StoppedBy.EXIT
        self.usage: TreeUsage | None = None
        self.leftovers_ended = 0
        self._left_at_end = 0
        self.lost: RemoteFailure | None = None
        self._listeners: list[Callable[[], None]] = []
        remote.ended.add_done_callback(self._ended)

    def __repr__(self) -> str:
        state = "running" if self.returncode is None else f"exited {self.returncode}"
        return f"<RemoteHandle pid={self.pid} node={self.node[:12]} {state}>"

    def _ended(self, ended: asyncio.Future[dict[str, Any]]) -> None:
        failure = ended.exception()
        if isinstance(failure, RemoteFailure):
            self.lost = failure
        elif failure is None:
            report = ended.result()
            self.returncode = int(report["returncode"])
            if report.get("stoppedBy"):
                self.stopped_by = StoppedBy(report["stoppedBy"])
            self._left_at_end = int(report.get("leftovers", 0))
            self.leftovers_ended += self._left_at_end  # and those ended while it ran
            self.usage = TreeUsage(
                cpu_seconds=float(report.get("cpuSeconds", 0.0)),
                rss_bytes=int(report.get("peakRssBytes", 0)),
                processes=int(report.get("processes", 1)),
            )
        if not self.exited.done():
            self.exited.set_result(None)
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener()

    def on_exit(self, listener: Callable[[], None]) -> Callable[[], None]:
        if self.exited.done():
            listener()
            return lambda: None
        self._listeners.append(listener)
        return functools.partial(_discard, self._listeners, listener)

    def create_time(self) -> float | None:
        return None  # not a process of this machine: nothing here can check it

    def hold_output(self) -> None:
        self._remote.hold_output()

    def release_output(self) -> None:
        self._remote.release_output()

    # A driven child's stdin, kept open (`LaunchSpec.keep_stdin`), and its group: what is
    # written, closed and signalled goes through the bridge to its actor and shim, in the
    # order it was said, without waiting here; once it ended (or was lost), to nothing.
    def write_input(self, data: bytes) -> None:
        self._remote.write_input(data)

    def close_input(self) -> None:
        self._remote.close_input()

    def signal_group(self, signum: int) -> None:
        self._remote.signal_group(signum)

    async def end_descendants(self, grace_s: float, since_ticks: int | None = None) -> int:
        """Its shim ends them on its node (a stop sequence of `grace_s`). `since_ticks` is
        this machine's clock, not its node's: it goes as an age, which its shim takes from
        its own clock. The age errs late by the request's way there (a few ms), which
        only a process started that soon after the mark escapes; a tool a turn runs
        starts after its prompt took that same way, and a model answered it. Waited for
        `grace_s` and STOP_MARGIN_S at most (then 0: a node that does not answer is
        lost, and its end ends them)."""
        age = None if since_ticks is None else max(0, ticks_now() - since_ticks)
        try:
            async with asyncio.timeout(grace_s + STOP_MARGIN_S):
                ended = await self._remote.end_descendants(grace_s, age)
        except TimeoutError:
            return 0
        self.leftovers_ended += ended
        return ended

    async def wait(self) -> ProcessExit:
        await self.exited
        if self.lost is not None:
            raise ChildLost(self.lost.reason, str(self.lost))
        assert self.returncode is not None
        return ProcessExit.from_returncode(self.returncode)

    async def stop(self, grace_s: float) -> TreeStopReport:
        """Its shim carries out the stop sequence on its node; its report tells how it went
        (waited for `grace_s` and STOP_MARGIN_S at most: a node that never answers is lost)."""
        if self.exited.done():
            return TreeStopReport(StopStep.NOTHING_LEFT, 0)
        self._remote.stop(grace_s)
        try:
            await asyncio.wait_for(asyncio.shield(self.exited), grace_s + STOP_MARGIN_S)
        except TimeoutError:
            logger.error(
                "%r: no report of its end %.0f s after the stop",
                self,
                grace_s + STOP_MARGIN_S,
                extra=dict(self.log_fields),
            )
        step = StopStep.SIGKILL if self.stopped_by is StoppedBy.SIGKILL else StopStep.SIGTERM
        return TreeStopReport(step, 1 + self._left_at_end)


def _discard(listeners: list[Callable[[], None]], listener: Callable[[], None]) -> None:
    if listener in listeners:
        listeners.remove(listener)


class RayExecutor:
    """Runs children on a Ray cluster; one bridge per server, opened again when it is gone."""

    starts_at_once: Final = False  # a child may wait for a node that can hold it

    def __init__(
        self, supervisor: Supervisor, choice: ExecutorChoice, env: Mapping[str, str]
    ) -> None:
        self._supervisor = supervisor
        self._choice = choice
        self._env = dict(env)
        self._opening: asyncio.Task[RayBridge] | None = None
        self._closed = False

    def open_soon(self) -> None:
        """Begin joining the cluster now (the server's start), so a first spawn need not wait."""
        self._open()

    def _open(self) -> asyncio.Task[RayBridge]:
        opening = self._opening
        stale = (
            opening is not None
            and opening.done()
            and (
                opening.cancelled() or opening.exception() is not None or not opening.result().alive
            )
        )
        if opening is None or stale:
            opening = asyncio.create_task(
                RayBridge.open(
                    self._supervisor,
                    address=self._choice.address,
                    namespace=self._choice.namespace,
                    env=self._env,
                )
            )
            opening.add_done_callback(_log_open)
            self._opening = opening
        return opening

    async def bridge(self) -> RayBridge:
        """The bridge to the cluster, joined (again) if needed. ExecutorUnavailable."""
        if self._closed:
            raise ExecutorUnavailable("the server is stopping: no child goes to the cluster now")
        try:
            return await asyncio.shield(self._open())
        except ClusterUnreachable as exc:
            raise ExecutorUnavailable(str(exc)) from None

    async def start(self, spec: LaunchSpec, sink: OutputSink) -> RemoteHandle:
        try:
            bridge = await self.bridge()
        except ExecutorUnavailable as exc:
            raise ChildLost(CLUSTER_UNAVAILABLE, str(exc)) from None
        stdin = spec.stdin.decode("utf-8", "replace") if spec.stdin is not None else None
        try:
            remote = await bridge.start(
                spec.argv,
                cwd=spec.cwd,
                env=spec.env,
                grace_s=LEFTOVER_GRACE_S,
                sink=sink,
                stdin=stdin,
                keep_stdin=spec.keep_stdin,
                placement=spec.placement,
                placement_timeout_s=min(
                    PLACEMENT_TIMEOUT_S, spec.placement_wait_s or PLACEMENT_TIMEOUT_S
                ),
            )
        except RemoteFailure as failure:
            if failure.reason == SPAWN_FAILED:  # exec refused it there, as it would here
                raise OSError(str(failure)) from None
            raise ChildLost(failure.reason, str(failure)) from None
        return RemoteHandle(remote, remote.started.result(), spec.log_fields)

    async def close(self) -> None:
        """Leave the cluster: the bridge kills its actors, their shims end the trees."""
        self._closed = True
        opening = self._opening
        if opening is None:
            return
        try:
            bridge = await opening
        except (ClusterUnreachable, asyncio.CancelledError):
            return
        await bridge.close()


def _log_open(opening: asyncio.Task[RayBridge]) -> None:
    if opening.cancelled():
        return
    if (failure := opening.exception()) is not None:
        logger.warning("%s", failure)
    else:
        logger.info("joined the Ray cluster (driver on node %s)", opening.result().node)
