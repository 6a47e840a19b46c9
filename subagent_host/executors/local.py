"""The local executor: children run on this machine, under the server's supervisor."""

from __future__ import annotations

from subagent_host.backends.supervisor import Child, Supervisor
from subagent_host.executors.base import Executor


def local_executor(supervisor: Supervisor) -> Executor[Child]:
    """This machine's executor: the supervisor itself (process trees, pipes, cgroups or
    the subreaper, sampling), with nothing in between, so a local child pays nothing
    for the seam."""
    return supervisor
