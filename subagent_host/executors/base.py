"""The executor interface: what the child runner needs of wherever a child runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Final, Protocol, TypeVar

from subagent_host.backends.exits import ProcessExit, StoppedBy
from subagent_host.backends.supervisor import LaunchSpec, OutputSink, TreeStopReport, TreeUsage


class StartedChild(Protocol):
    """A started child as its supervision sees it, wherever it runs (a local `Child`,
    or a remote one: executors/ray_executor.py)."""

    @property
    def pid(self) -> int:
        """Its pid, on the machine it runs on."""
        ...

    @property
    def pgid(self) -> int | None: ...

    @property
    def node(self) -> str | None:
        """The cluster node it runs on; None: this machine."""
        ...

    @property
    def log_fields(self) -> Mapping[str, object]: ...

    @property
    def exited(self) -> asyncio.Future[None]:
        """Done once it has exited."""
        ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def stopped_by(self) -> StoppedBy:
        """The last signal of a stop sequence that found it still running (else `exit`)."""
        ...

    @property
    def usage(self) -> TreeUsage | None:
        """Its tree's CPU time and peak memory, once it has ended (None: not known)."""
        ...

    @property
    def leftovers_ended(self) -> int:
        """Processes of its tree other than itself that a stop sequence ended."""
        ...

    def on_exit(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` once it has exited; returns what removes the listener."""
        ...

    def create_time(self) -> float | None:
        """Its start time as this machine can check it (None: not checkable here)."""
        ...

    def hold_output(self) -> None:
        """Read no more of its stdout and stderr for now: it blocks on write (a slow client)."""
        ...

    def release_output(self) -> None: ...


C = TypeVar("C", bound=StartedChild)


class Executor(Protocol[C]):
    """Starts a prepared launch, reports its exit, ends its tree (runs/child_runner.py)."""

    @property
    def starts_at_once(self) -> bool:
        """True: `start` never waits for somewhere to run (this machine); False: it may
        (a cluster's node), and a stop of the run cancels it, which calls the start off."""
        ...

    async def start(self, spec: LaunchSpec, sink: OutputSink) -> C:
        """Start the child; its output goes to `sink` as it comes.

        OSError: it cannot start; ChildLost: it never ran where it was sent.
        """
        ...

    async def wait(self, child: C) -> ProcessExit:
        """How the child exited, once nothing of its tree is left. ChildLost."""
        ...

    async def stop(self, child: C, grace_s: float) -> TreeStopReport:
        """End the child's whole tree: SIGTERM, `grace_s`, then SIGKILL (protocol.md §10)."""
        ...


# The failed child's error code, and the diagnostic's, when its cluster cannot be reached.
CLUSTER_UNAVAILABLE: Final = "cluster-unavailable"


class ChildLost(Exception):
    """A child that never ran, or was lost, where its executor sent it: its `code`
    (`unplaceable`, `node-lost`, `cluster-unavailable`) is the failed child's error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ExecutorUnavailable(Exception):
    """The executor cannot take children now (a cluster it cannot reach): -32002."""
