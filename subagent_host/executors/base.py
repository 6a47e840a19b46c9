"""The executor interface: what the child runner needs of wherever a child runs.

An executor starts a prepared launch and gives back one handle per started child
(`ChildHandle`), as jupyter_client's provisioners and anyio's `Process` do: the
child's facts, its exit (`wait`) and the end of its whole tree (`stop`) are the
handle's, wherever the child runs. `local.py` wraps this machine's supervisor
and its `Child`; `ray_executor.py` a child on a node of a cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Final, Protocol

from subagent_host.backends.exits import ProcessExit, StoppedBy
from subagent_host.backends.supervisor import LaunchSpec, OutputSink, TreeStopReport, TreeUsage


class ChildHandle(Protocol):
    """One started child as its supervision sees it, wherever it runs."""

    @property
    def pid(self) -> int:
        """Its pid, on the machine it runs on."""
        ...

    @property
    def pgid(self) -> int | None:
        """Its process group, when it is one of this machine's (None: elsewhere)."""
        ...

    @property
    def node(self) -> str | None:
        """The cluster node it runs on; None: this machine."""
        ...

    @property
    def log_fields(self) -> Mapping[str, object]:
        """The `extra` of a log line about it (its run, index, pid, node)."""
        ...

    @property
    def exited(self) -> asyncio.Future[None]:
        """Done once it has exited (its tree may still be ending: `wait` says when not)."""
        ...

    @property
    def returncode(self) -> int | None:
        """As `subprocess` spells it, once it has exited (None: not yet, or not known)."""
        ...

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

    def release_output(self) -> None:
        """Read its output again."""
        ...

    def write_input(self, data: bytes) -> None:
        """Write to its stdin, kept open (`LaunchSpec.keep_stdin`); nothing once closed."""
        ...

    def close_input(self) -> None:
        """Close its stdin: a child that reads commands there ends at its end."""
        ...

    def signal_group(self, signum: int) -> None:
        """Send `signum` to its process group while it runs, as a terminal's Ctrl-C does."""
        ...

    async def end_descendants(self, grace_s: float, since_ticks: int | None = None) -> int:
        """End what it left running (its tree but itself; with `since_ticks`, only the
        processes started since then, in clock ticks since boot); how many processes."""
        ...

    async def wait(self) -> ProcessExit:
        """How it exited, once nothing of its tree is left; never bounded here (its caller
        bounds it, or has stopped it). ChildLost: it was lost where it ran."""
        ...

    async def stop(self, grace_s: float) -> TreeStopReport:
        """End its whole tree: SIGTERM, `grace_s`, then SIGKILL (protocol.md §10); which
        step ended it, and how many processes. `wait` then reports its exit."""
        ...


class Executor(Protocol):
    """Starts a prepared launch and hands back its child's handle (runs/child_runner.py)."""

    @property
    def starts_at_once(self) -> bool:
        """True: `start` never waits for somewhere to run (this machine); False: it may
        (a cluster's node), and a stop of the run cancels it, which calls the start off."""
        ...

    async def start(self, spec: LaunchSpec, sink: OutputSink) -> ChildHandle:
        """Start the child; its output goes to `sink` as it comes.

        OSError: it cannot start; ChildLost: it never ran where it was sent.
        """
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
