"""What the benchmarks share: bounded waits, the failure type, and a stderr drain."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from typing import Final, TypeVar

T = TypeVar("T")

# Generous bound on any single phase (a whole timed run, a warm-up, a shutdown step).
PHASE_TIMEOUT_S: Final = 120.0
STDERR_TAIL_BYTES: Final = 4096
READ_CHUNK: Final = 64 * 1024


class BenchError(Exception):
    """A protocol error, timeout or misbehaving process: the run is invalid."""


async def bounded(aw: Awaitable[T], what: str, limit_s: float = PHASE_TIMEOUT_S) -> T:
    """Await `aw` for at most `limit_s` seconds; running out of time is a BenchError."""
    try:
        async with asyncio.timeout(limit_s):
            return await aw
    except TimeoutError:
        raise BenchError(f"timed out after {limit_s:g} s while {what}") from None


async def start_piped(
    argv: Sequence[str], what: str, limit: int, env: Mapping[str, str] | None = None
) -> asyncio.subprocess.Process:
    """Start `argv` with stdin, stdout and stderr piped; failing to start is a BenchError."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=limit,
            env=env,
        )
    except OSError as exc:
        raise BenchError(f"cannot start {what} {list(argv)}: {exc}") from None
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    return proc


async def drain_stderr(stream: asyncio.StreamReader, tail: bytearray) -> None:
    """Read stderr to EOF so the server can never block on it; keep the tail."""
    while chunk := await stream.read(READ_CHUNK):
        tail += chunk
        del tail[:-STDERR_TAIL_BYTES]
