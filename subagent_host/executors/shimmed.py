"""Start a child under the shim (shim.py) and talk to it over its two pipes.

The cluster executor's actor does this on its node; nothing here imports Ray.
The caller keeps the lifeline's write end: closing it (or dying) ends the tree,
a `stop` line ends it with the stop sequence, a `signal` line signals the child's
group and an `end` line ends what it left running. The child's exit comes over the
status pipe (after the answers to `end`), never from waiting on the shim's first
process (which exits at once) or on the pipes (which the tree holds). A child
started with its stdin kept open (`keep_stdin`) reads what `write_input` writes
there, in order, until `close_input`.
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
        self.pid: int = int(started["pid"])
        """The child's pid (on the node it runs on)."""
        self.shim: int = int(started["shim"])
        """The shim's pid: the session leader and subreaper of the child's tree."""
        assert process.stdout is not None and process.stderr is not None
        self.stdout: asyncio.StreamReader = process.stdout
        self.stderr: asyncio.StreamReader = process.stderr
        self._stdin = process.stdin  # None: not kept open (closed once `stdin` was written)
        self._ends: dict[int, asyncio.Future[int]] = {}
        """The `end` requests not answered yet, by their number."""
        self._asked = 0  # the number of the last `end` request
        self._exit_line: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._reading = asyncio.create_task(self._read_status(status))

    async def _read_status(self, status: asyncio.StreamReader) -> None:
        """The shim's reports: the answers to `end`, then the child's exit (b"": none)."""
        try:
            while line := await status.readline():
                message = json.loads(line)
                if "req" not in message:
                    self._exit_line.set_result(line)
                    return
                if (answered := self._ends.pop(int(message["req"]), None)) is not None:
                    answered.set_result(int(message["ended"]))
        finally:
            if not self._exit_line.done():  # it ended without a report (exit says so)
                self._exit_line.set_result(b"")
            for pending in self._ends.values():  # the tree is ending: nothing more to end
                pending.set_result(0)
            self._ends.clear()

    def _tell(self, line: str) -> bool:
        """One line to the shim; False when it is gone (or was let go)."""
        if self._lifeline is None:
            return False
        try:
            os.write(self._lifeline, line.encode() + b"\n")
        except BrokenPipeError:  # the shim has ended the tree and exited: nothing to do
            return False
        return True

    def stop(self, grace_s: float) -> None:
        """Ask for the stop sequence: SIGTERM to the whole tree, `grace_s`, SIGKILL."""
        self._tell(f"stop {grace_s}")

    async def write_input(self, data: bytes) -> None:
        """Write to the child's stdin (kept open) and wait until the pipe took it; nothing
        once it is closed, or when the child is gone (what it did not read is its own)."""
        if self._stdin is None or self._stdin.is_closing():
            return
        self._stdin.write(data)
        try:
            await self._stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            self._stdin.close()

    def close_input(self) -> None:
        """Close the child's stdin: a child that reads commands there ends at its end."""
        if self._stdin is not None:
            self._stdin.close()

    def signal_group(self, signum: int) -> None:
        """Send `signum` to the child's process group (the shim does, while the child runs)."""
        self._tell(f"signal {int(signum)}")

    async def end_descendants(self, grace_s: float, age_ticks: int | None) -> int:
        """End what the child left running (with `age_ticks`, only what started at most
        that many clock ticks ago, as the shim reads its node's clock): the shim's stop
        sequence for those processes. How many there were (0 once the child is gone: its
        end ends them)."""
        self._asked += 1
        number = self._asked
        answered: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        age = "-" if age_ticks is None else str(max(0, int(age_ticks)))
        if self._exit_line.done() or not self._tell(f"end {number} {grace_s} {age}"):
            return 0
        self._ends[number] = answered
        return await answered

    def abandon(self) -> None:
        """Close the lifeline, as the caller's death would: the shim ends the tree."""
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None

    async def exit(self) -> ShimExit:
        """Wait for the end of the child and of everything it started."""
        line = await self._exit_line
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
    keep_stdin: bool = False,
) -> ShimmedChild:
    """Start `argv` under a shim with exactly `env`; OSError when it cannot start. Its
    stdin: `stdin`, then closed, unless `keep_stdin` (then `write_input` writes more)."""
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
            stdin=(
                asyncio.subprocess.PIPE
                if stdin is not None or keep_stdin
                else asyncio.subprocess.DEVNULL
            ),
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
    if not keep_stdin and process.stdin is not None:
        process.stdin.close()
    return ShimmedChild(process, lifeline_w, status, started)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
