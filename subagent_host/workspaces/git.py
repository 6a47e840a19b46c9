"""Run git: argv only, never on the loop's thread, every wait bounded.

How a git process is started is injected (`Runner`): the server runs it through
its supervisor (`backends/helper_runner.py`: the one code that forks and reaps); the
terminal, which supervises nothing, uses `local_runner`, a plain asyncio
subprocess in a session of its own. Either way a call that outlives its bound
or is cancelled has its process ended before the exception goes on. Repository
hooks never run: a `post-checkout` hook of the user's repository has no
business in a worktree the server makes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from typing import Final, Protocol

# A checkout of a large repository takes a while; a git that takes longer is stuck.
GIT_TIMEOUT_S: Final = 120.0
# How long a killed git may take to be reaped.
REAP_TIMEOUT_S: Final = 5.0
# How much of git's stderr an error quotes.
STDERR_SHOWN_CHARS: Final = 500
# Variables that would point git at another repository or index than the one asked.
_REPOSITORY_VARIABLES: Final = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
)


class GitFailed(Exception):
    """git could not be run, exited with an error, or took too long; the message says which."""


class Runner(Protocol):
    """Runs one program to its end: (exit status, stdout, stderr), the exit status None
    when it took longer than `timeout_s` (it was ended); OSError if it cannot start."""

    async def __call__(
        self, argv: tuple[str, ...], cwd: str, env: Mapping[str, str], timeout_s: float
    ) -> tuple[int | None, bytes, bytes]: ...


async def local_runner(
    argv: tuple[str, ...], cwd: str, env: Mapping[str, str], timeout_s: float
) -> tuple[int | None, bytes, bytes]:
    """A `Runner` for a process that supervises no children of its own (the terminal)."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout_s)
    except TimeoutError:
        await _end(process)
        return None, b"", b""
    except BaseException:  # cancelled: the process goes with the call
        await asyncio.shield(_end(process))
        raise
    return process.returncode, out, err


async def _end(process: asyncio.subprocess.Process) -> None:
    """Kill the process's group and reap it (bounded)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), REAP_TIMEOUT_S)


def _environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _REPOSITORY_VARIABLES}
    # Never ask a person anything, and read git's output in one language.
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", **(extra or {}))
    return env


class Git:
    """git commands through one `Runner`."""

    def __init__(self, runner: Runner = local_runner) -> None:
        self._runner = runner

    async def __call__(self, *args: str, cwd: str, env: Mapping[str, str] | None = None) -> str:
        """git's stdout for `git -C cwd ARGS` (hooks off); GitFailed when it does not succeed."""
        argv = ("git", "-C", cwd, "-c", "core.hooksPath=/dev/null", *args)
        try:
            code, out, err = await self._runner(argv, cwd, _environment(env), GIT_TIMEOUT_S)
        except OSError as exc:
            raise GitFailed(f"cannot run git: {exc.strerror or exc}") from None
        if code is None:
            raise GitFailed(f"git {args[0]} took longer than {GIT_TIMEOUT_S:.0f}s")
        if code != 0:
            message = err.decode(errors="replace").strip()[:STDERR_SHOWN_CHARS]
            raise GitFailed(f"git {args[0]} failed: {message or f'exit status {code}'}")
        return out.decode(errors="surrogateescape")
