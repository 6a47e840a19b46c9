"""The executor interface: what the child runner needs of wherever a child runs."""

from __future__ import annotations

from typing import Protocol

from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.supervisor import Child, LaunchSpec, OutputSink, TreeStopReport


class Executor(Protocol):
    """Starts a prepared launch, reports its exit, ends its tree (runs/child_runner.py)."""

    async def start(self, spec: LaunchSpec, sink: OutputSink) -> Child:
        """Start the child; its output goes to `sink` as it comes. OSError: it cannot start."""
        ...

    async def wait(self, child: Child) -> ProcessExit:
        """How the child exited, once nothing of its tree is left."""
        ...

    async def stop(self, child: Child, grace_s: float) -> TreeStopReport:
        """End the child's whole tree: SIGTERM, `grace_s`, then SIGKILL (protocol.md §10)."""
        ...
