"""Run a short helper program (git for worktrees, a CLI's `--version`) to its end and
collect its output.

The server's own helper processes go through the supervisor like its children:
it is the one code that forks and reaps, and it reaps every child it did not
register as an adopted orphan (so a process forked beside it would lose its exit
status). Each call is bounded; one that outlives its bound or is cancelled has
its tree ended before the call returns or re-raises.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Final

from subagent_host.backends.supervisor import Child, LaunchSpec, Supervisor

# What a helper may print; more is cut (git's listings of a worktree stay far below).
COLLECTED_BYTES: Final = 16 * 1024 * 1024
# A helper ended for taking too long gets this long between SIGTERM and SIGKILL.
HELPER_GRACE_S: Final = 1.0


class _Collect:
    """An output sink keeping up to `limit` bytes of each stream."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self.stdout = bytearray()
        self.stderr = bytearray()

    def on_stdout(self, data: bytes) -> None:
        self.stdout += data[: max(0, self._limit - len(self.stdout))]

    def on_stderr(self, data: bytes) -> None:
        self.stderr += data[: max(0, self._limit - len(self.stderr))]


class HelperRunner:
    """Runs helper programs through the server's supervisor (workspaces' git runner, the
    version probes), keeping up to `limit` bytes of what each prints on each stream."""

    def __init__(self, supervisor: Supervisor, limit: int = COLLECTED_BYTES) -> None:
        self._supervisor = supervisor
        self._limit = limit

    async def __call__(
        self, argv: tuple[str, ...], cwd: str, env: Mapping[str, str], timeout_s: float
    ) -> tuple[int | None, bytes, bytes]:
        """(exit status, stdout, stderr); exit status None when it took longer than
        `timeout_s` and was ended. OSError when it cannot be started."""
        sink = _Collect(self._limit)
        child = await self._supervisor.start(
            LaunchSpec(argv=argv, cwd=cwd, env=env, name="helper"), sink
        )
        try:
            status = await asyncio.wait_for(self._supervisor.wait(child), timeout_s)
        except (TimeoutError, asyncio.CancelledError) as stopped:
            await asyncio.shield(self._end(child))
            if isinstance(stopped, asyncio.CancelledError):
                raise
            return None, bytes(sink.stdout), bytes(sink.stderr)
        code = status.exit_code if status.exit_code is not None else -1
        return code, bytes(sink.stdout), bytes(sink.stderr)

    async def _end(self, child: Child) -> None:
        await self._supervisor.stop(child, grace_s=HELPER_GRACE_S)
        await self._supervisor.wait(child)
