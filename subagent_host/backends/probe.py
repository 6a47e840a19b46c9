"""Can a launch start at all? Find the program a child would execute, as exec would.

A bare name is looked up on the child's PATH (the spawn's `env` PATH when it
gives one, else the server's); a name with a slash is taken relative to the
child's working directory. Only files this user may execute count.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterable, Mapping
from typing import Final

from subagent_host.backends.supervisor import Child, LaunchSpec, Supervisor


def find_executable(program: str, cwd: str, path: str | None) -> str | None:
    """The file that exec would run for `program`, or None."""
    if "/" in program:
        candidate = os.path.join(cwd, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.realpath(candidate)
        return None
    return shutil.which(program, path=path if path is not None else os.environ.get("PATH", ""))


class _Collect:
    """An output sink that keeps the first few KiB of each stream."""

    def __init__(self) -> None:
        self.stdout = bytearray()
        self.stderr = bytearray()

    def on_stdout(self, data: bytes) -> None:
        self.stdout += data[: max(0, VERSION_OUTPUT_BYTES - len(self.stdout))]

    def on_stderr(self, data: bytes) -> None:
        self.stderr += data[: max(0, VERSION_OUTPUT_BYTES - len(self.stderr))]


VERSION_OUTPUT_BYTES: Final = 4096
VERSION_TIMEOUT_S: Final = 30.0


class VersionProbes:
    """`<program> --version`, once per program path, through the supervisor.

    Every child of the server is started by the supervisor (its orphan reaping
    would otherwise take their exit statuses), this probe included. A probe
    that fails or takes too long is remembered as unknown (None).
    """

    def __init__(self, supervisor: Supervisor, env: Mapping[str, str]) -> None:
        self._supervisor = supervisor
        self._env = dict(env)
        self._known: dict[str, asyncio.Task[str | None]] = {}
        self._located: dict[str, str | None] = {}
        self.settled = 0
        """How many probes have ended: what `cached` answers changes only when this does."""

    def locate(self, program: str) -> str | None:
        """Where `program` is on the server's PATH, as found the first time it was asked."""
        if program not in self._located:
            self._located[program] = find_executable(program, os.getcwd(), os.environ.get("PATH"))
        return self._located[program]

    def start(self, programs: Iterable[str]) -> None:
        """Probe, in the background, each program found on the server's PATH."""
        for program in programs:
            if self.locate(program) and program not in self._known:
                self._known[program] = asyncio.ensure_future(self._probe(program))

    async def close(self) -> None:
        """End the probes still running (their processes with them)."""
        for task in self._known.values():
            task.cancel()
        await asyncio.gather(*self._known.values(), return_exceptions=True)

    def cached(self, program: str) -> str | None:
        """The version found so far (None while unknown or still probing)."""
        task = self._known.get(program)
        if task is None or not task.done() or task.cancelled() or task.exception():
            return None
        return task.result()

    async def version(self, program: str) -> str | None:
        task = self._known.get(program)
        if task is None:
            task = asyncio.ensure_future(self._probe(program))
            self._known[program] = task
        return await asyncio.shield(task)

    async def _probe(self, program: str) -> str | None:
        try:
            return await self._run_probe(program)
        finally:
            # In the step that ends the task, so no one sees it done with the old count.
            self.settled += 1

    async def _run_probe(self, program: str) -> str | None:
        sink = _Collect()
        spec = LaunchSpec(argv=(program, "--version"), cwd=os.getcwd(), env=self._env)
        try:
            child = await self._supervisor.start(spec, sink)
        except OSError:
            return None
        try:
            status = await asyncio.wait_for(self._supervisor.wait(child), VERSION_TIMEOUT_S)
        except (TimeoutError, asyncio.CancelledError) as stopped:
            # Too slow, or the server is going: nothing of the probe may outlive it.
            await asyncio.shield(self._end(child))
            if isinstance(stopped, asyncio.CancelledError):
                raise
            return None
        if status.exit_code != 0:
            return None
        return _first_line(sink)

    async def _end(self, child: Child) -> None:
        await self._supervisor.stop(child, grace_s=1.0)
        await self._supervisor.wait(child)


def _first_line(sink: _Collect) -> str | None:
    # Some CLIs print their version on stderr when stdout is not a terminal.
    text = (bytes(sink.stdout) or bytes(sink.stderr)).decode("utf-8", "replace").strip()
    return text.splitlines()[0][:100] if text else None
