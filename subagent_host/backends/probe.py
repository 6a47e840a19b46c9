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

from subagent_host.backends.helper_runner import HelperRunner
from subagent_host.backends.supervisor import Supervisor


def find_executable(program: str, cwd: str, path: str | None) -> str | None:
    """The file that exec would run for `program`, or None."""
    if "/" in program:
        candidate = os.path.join(cwd, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.realpath(candidate)
        return None
    return shutil.which(program, path=path if path is not None else os.environ.get("PATH", ""))


VERSION_OUTPUT_BYTES: Final = 4096
VERSION_TIMEOUT_S: Final = 30.0


class VersionProbes:
    """`<program> --version`, once per program path, through the supervisor.

    Every child of the server is started by the supervisor (its orphan reaping
    would otherwise take their exit statuses), this probe included. A probe
    that fails or takes too long is remembered as unknown (None).
    """

    def __init__(self, supervisor: Supervisor, env: Mapping[str, str]) -> None:
        self._run = HelperRunner(supervisor, VERSION_OUTPUT_BYTES)
        self._env = dict(env)
        self._known: dict[str, asyncio.Task[str | None]] = {}
        self._located: dict[str, str | None] = {}
        self.ended = 0
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

    async def version(self, program: str, key: str | None = None) -> str | None:
        """`program --version`, probed once per `key` (by default the program itself: a
        caller that knows which file it is keys it by that file's digest, so a file
        replaced under the same name is asked again)."""
        key = program if key is None else key
        task = self._known.get(key)
        if task is None:
            task = asyncio.ensure_future(self._probe(program))
            self._known[key] = task
        return await asyncio.shield(task)

    async def _probe(self, program: str) -> str | None:
        try:
            return await self._run_probe(program)
        finally:
            # In the step that ends the task, so no one sees it done with the old count.
            self.ended += 1

    async def _run_probe(self, program: str) -> str | None:
        # Too slow (status None), or the server is going: the runner ends its tree.
        try:
            status, stdout, stderr = await self._run(
                (program, "--version"), os.getcwd(), self._env, VERSION_TIMEOUT_S
            )
        except OSError:
            return None
        if status != 0:
            return None
        return _first_line(stdout, stderr)


def _first_line(stdout: bytes, stderr: bytes) -> str | None:
    # Some CLIs print their version on stderr when stdout is not a terminal.
    text = (stdout or stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0][:100] if text else None
