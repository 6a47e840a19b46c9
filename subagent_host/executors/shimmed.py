"""Start a child under the shim (shim.py) and talk to it over its two pipes.

The cluster executor's actor does this on its node; nothing here imports Ray.
The caller keeps the lifeline's write end: closing it (or dying) ends the tree,
a `stop` line ends it with the stop sequence. The child's exit comes over the
status pipe, never from waiting on the shim's first process (which exits at
once) or on the pipes (which the tree holds).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

# How long the shim may take to report its child started (a Python start and an exec).
START_TIMEOUT_S: Final = 30.0
# How much of the child's output may wait here to be read in one go: a chatty child's
# output then leaves in few large chunks (each a round trip through Ray), not many small.
OUTPUT_BUFFER_BYTES: Final = 1024 * 1024
# What the shim's own interpreter needs of the caller's environment to find this package.
SHIM_ENVIRONMENT: Final = ("PATH", "PYTHONPATH", "LANG", "LC_ALL")


@attrs.frozen
class ShimExit:
    """How a shimmed child ended, as its shim reported it."""

    returncode: int
    """As `subprocess` spells it: the exit status, or minus the signal that ended it."""
    stopped_by: str | None
    """`sigterm` or `sigkill` when the shim ended the tree (a stop, the lifeline's end)."""
    leftovers: int
    """Processes the child left behind when it exited by itself (the shim ended them)."""
    cpu_seconds: float
    """CPU time of the whole tree (every process of it was reaped before the report)."""
    peak_rss_bytes: int
    """The most memory seen: the largest single process or the largest sum of the tree's."""
    processes: int
    """The most processes of the tree (the child included) the shim saw at once."""


class ShimmedChild:
    """One child under its shim: its pids, its output, its stop and its exit."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        lifeline: int,
        status: asyncio.StreamReader,
        started: Mapping[str, Any],
    ) -> None:
        self._process = process
        self._lifeline: int | None = lifeline
        self._status = status
        self.pid: int = int(started["pid"])
        """The child's pid (on the node it runs on)."""
        self.shim: int = int(started["shim"])
        """The shim's pid: the session leader and subreaper of the child's tree."""
        assert process.stdout is not None and process.stderr is not None
        self.stdout: asyncio.StreamReader = process.stdout
        self.stderr: asyncio.StreamReader = process.stderr

    def stop(self, grace_s: float) -> None:
        """Ask for the stop sequence: SIGTERM to the whole tree, `grace_s`, SIGKILL."""
        if self._lifeline is not None:
            os.write(self._lifeline, f"stop {grace_s}\n".encode())

    def abandon(self) -> None:
        """Close the lifeline, as the caller's death would: the shim ends the tree."""
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None

    async def exit(self) -> ShimExit:
        """Wait for the end of the child and of everything it started."""
        line = await self._status.readline()
        self.abandon()
        await self._process.wait()  # the tree is gone: nothing holds its pipes now
        if not line:
            raise OSError("the shim ended without reporting the child's exit")
        message = json.loads(line)
        return ShimExit(
            returncode=int(message["returncode"]),
            stopped_by=message["stoppedBy"],
            leftovers=int(message["leftovers"]),
            cpu_seconds=float(message["cpuSeconds"]),
            peak_rss_bytes=int(message["peakRssBytes"]),
            processes=int(message["processes"]),
        )


async def start_shimmed(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    grace_s: float,
    stdin: bytes | None = None,
) -> ShimmedChild:
    """Start `argv` under a shim with exactly `env`; OSError when it cannot start."""
    loop = asyncio.get_running_loop()
    lifeline_r, lifeline_w = os.pipe2(os.O_CLOEXEC)
    status_r, status_w = os.pipe2(os.O_CLOEXEC)
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "subagent_host.executors.shim",
            str(lifeline_r),
            str(status_w),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=(lifeline_r, status_w),
            env={name: os.environ[name] for name in SHIM_ENVIRONMENT if name in os.environ},
            limit=OUTPUT_BUFFER_BYTES,
        )
    except BaseException:
        for fd in (lifeline_r, lifeline_w, status_r, status_w):
            os.close(fd)
        raise
    os.close(lifeline_r)
    os.close(status_w)
    status = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(status), os.fdopen(status_r, "rb", 0)
    )
    spec = {"argv": list(argv), "cwd": cwd, "env": dict(env), "graceS": grace_s}
    await asyncio.to_thread(_write_all, lifeline_w, json.dumps(spec).encode() + b"\n")
    try:
        line = await asyncio.wait_for(status.readline(), START_TIMEOUT_S)
    except BaseException:
        os.close(lifeline_w)  # the shim ends whatever it started
        raise
    started: dict[str, Any] = (
        json.loads(line) if line else {"error": "the shim did not start", "errno": 0}
    )
    if "error" in started:
        os.close(lifeline_w)
        await process.wait()
        raise OSError(int(started["errno"]) or None, str(started["error"]))
    if stdin is not None:
        assert process.stdin is not None
        process.stdin.write(stdin)
        await process.stdin.drain()
        process.stdin.close()
    return ShimmedChild(process, lifeline_w, status, started)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
