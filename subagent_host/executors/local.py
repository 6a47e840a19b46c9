"""The local executor: children run on this machine, under the server's supervisor."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping
from typing import Final

from subagent_host.backends.exits import ProcessExit, StoppedBy
from subagent_host.backends.supervisor import (
    Child,
    LaunchSpec,
    OutputSink,
    Supervisor,
    TreeStopReport,
    TreeUsage,
)


class LocalHandle:
    """A child of this machine (a `ChildHandle`): the supervisor's `Child`, whose exit and
    stop the supervisor carries out (its reaping, its leftovers, its cgroup)."""

    __slots__ = ("_supervisor", "child")

    def __init__(self, supervisor: Supervisor, child: Child) -> None:
        self._supervisor = supervisor
        self.child: Final = child
        """The process itself (the resource sampler measures its tree with the others')."""

    def __repr__(self) -> str:
        return repr(self.child)

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def pgid(self) -> int:
        return self.child.pgid

    @property
    def node(self) -> None:
        return None

    @property
    def log_fields(self) -> Mapping[str, object]:
        return self.child.log_fields

    @property
    def exited(self) -> asyncio.Future[None]:
        return self.child.exited

    @property
    def returncode(self) -> int | None:
        return self.child.returncode

    @property
    def stopped_by(self) -> StoppedBy:
        return self.child.stopped_by

    @property
    def usage(self) -> TreeUsage | None:
        return self.child.usage

    @property
    def leftovers_ended(self) -> int:
        return self.child.leftovers_ended

    def on_exit(self, listener: Callable[[], None]) -> Callable[[], None]:
        return self.child.on_exit(listener)

    def create_time(self) -> float | None:
        return self.child.create_time()

    def hold_output(self) -> None:
        self.child.hold_output()

    def release_output(self) -> None:
        self.child.release_output()

    def write_input(self, data: bytes) -> None:
        if self.child.input is not None:
            self.child.input.send(data)

    def close_input(self) -> None:
        if self.child.input is not None:
            self.child.input.close()

    def signal_group(self, signum: int) -> None:
        # The child leads its group: while it is not reaped, the group's id is its own.
        if self.child.pid_is_ours():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.child.pgid, signum)

    async def end_descendants(self, grace_s: float, since_ticks: int | None = None) -> int:
        return await self._supervisor.end_descendants(self.child, grace_s, since_ticks)

    async def wait(self) -> ProcessExit:
        return await self._supervisor.wait(self.child)

    async def stop(self, grace_s: float) -> TreeStopReport:
        return await self._supervisor.stop(self.child, grace_s)


class LocalExecutor:
    """This machine's executor: the supervisor (process trees, pipes, cgroups or the
    subreaper, sampling), with nothing in between but the handle."""

    starts_at_once: Final = True  # a start never waits to be placed

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor: Final = supervisor

    async def start(self, spec: LaunchSpec, sink: OutputSink) -> LocalHandle:
        """Start the child here. OSError: it cannot start."""
        return LocalHandle(self.supervisor, await self.supervisor.start(spec, sink))
