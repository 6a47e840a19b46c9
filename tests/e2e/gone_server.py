"""A real leftover of a gone server: a process that ignores SIGTERM, which a SIGKILLed
server (its guardian killed with it) left behind on a state directory. The next server
on that state directory ends it (protocol.md §13): after the grace, with SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import psutil

from subagent_host.backends import cgroups, lifeline
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    kill_with_its_guardian,
    running_server,
    state_args,
)

# Ignored SIGTERM is inherited through exec: `sleep` outlives every SIGTERM of the sweep.
STUBBORN: Final = "trap '' TERM; echo $$; exec sleep 1000"


@contextlib.asynccontextmanager
async def stubborn_leftover(
    state_dir: Path, tracking: str = "marker"
) -> AsyncIterator[psutil.Process]:
    """Yield the leftover of a gone server on `state_dir` while it runs; killed (by pid)
    afterwards if the test left it running. Marker tracking: it is in no cgroup, so only
    a server on this state directory ends it, never a server of another test; cgroup
    tracking: it is in the gone server's cgroup, which any server on this host sweeps."""
    async with running_server(*state_args(state_dir), "--process-tracking", tracking) as first:
        await first.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "spawn",
                "params": {"command": ["sh", "-c", STUBBORN], "stream": True},
            }
        )
        text = ""
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while "\n" not in text:
                params = (await first.receive()).get("params", {})
                if params.get("type") == "output":
                    text += params["text"]
        leftover = psutil.Process(int(text.split()[0]))
        kill_with_its_guardian(first)
        assert await asyncio.wait_for(first.proc.wait(), EXIT_TIMEOUT_S) == -signal.SIGKILL
        first.run_ids.clear()  # the next server ends it
    try:
        assert leftover.is_running() and leftover.status() != psutil.STATUS_ZOMBIE
        yield leftover
    finally:
        with contextlib.suppress(psutil.Error):
            leftover.kill()  # by pid: the leftover this test made


def still_runs(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def instance_cgroup_of(process: psutil.Process) -> Path:
    """The instance cgroup (a server's, `i<pid>-<ticks>-locked`) the process's cgroup is in."""
    hierarchy = cgroups.find_hierarchy()
    assert hierarchy is not None
    relative = Path(f"/proc/{process.pid}/cgroup").read_text().split("::", 1)[1].strip()
    path = hierarchy.mount / relative.lstrip("/")
    while not cgroups.INSTANCE_PATTERN.fullmatch(path.name):
        assert path != hierarchy.root, f"{process.pid} is in no instance cgroup"
        path = path.parent
    return path


def guardians_logging_to(log: Path) -> list[psutil.Process]:
    """The live guardians (backends/guardian.py) writing to `log`: those of the servers
    whose stderr it is (`subagent-host run` gives its server the state directory's log)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if lifeline.PROGRAM not in (process.info["cmdline"] or [])[:5]:
            continue
        with contextlib.suppress(psutil.Error):
            if process.status() != psutil.STATUS_ZOMBIE and any(
                Path(opened.path) == log for opened in process.open_files()
            ):
                found.append(process)
    return found
