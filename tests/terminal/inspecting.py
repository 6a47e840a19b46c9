"""What the tests of `runs`, `show` and `logs` share: the subcommand run as a person's
shell runs it (its own process, stdout a pipe), and servers writing a state directory."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import struct
import sys
import termios
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs

from subagent_host.client import Host
from tests.client.conftest import Seen
from tests.e2e.harness import assert_no_run_survives, assert_nothing_left

COMMAND_TIMEOUT_S: Final = 30
ANSI: Final = re.compile(r"\x1b[\[\]()]")
BOX_DRAWING: Final = re.compile(r"[\u2500-\u257f]")


@attrs.frozen
class Finished:
    status: int
    stdout: str
    stderr: str


def environment() -> dict[str, str]:
    """This environment without what would force colours on a pipe."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    return {**env, "COLUMNS": "80"}


# Starts `python -m subagent_host ARGS...` with SIGINT at its default disposition, as a
# person's shell gives a command. A test suite run as a background job (`.ci/run &`)
# inherits SIGINT ignored, an ignored signal stays ignored across exec, and Python then
# never turns Ctrl-C into KeyboardInterrupt: the command would not see it at all.
WITH_CTRL_C: Final = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'subagent_host', *sys.argv[1:]])"
)


async def start(*args: str) -> asyncio.subprocess.Process:
    """`subagent-host ARGS...` started with pipes, Ctrl-C reaching it as from a shell."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WITH_CTRL_C,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(),
    )


async def command(*args: str) -> Finished:
    """`subagent-host ARGS...` to its end (bounded), stdout and stderr pipes."""
    process = await start(*args)
    try:
        async with asyncio.timeout(COMMAND_TIMEOUT_S):
            stdout, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return Finished(process.returncode, stdout.decode(), stderr.decode())


def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@asynccontextmanager
async def server(
    tmp_path: Path,
    session: str,
    framing: str = "ndjson",
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[Host]:
    """A server on the test's state directory (`state(tmp_path)`), bound to `session`;
    afterwards it has exited, nothing it started survives and it logged no traceback
    (as tests/client/conftest.py's `started`). Two at once take different framings:
    each logs to a file of its framing's name."""
    seen = Seen()
    log = tmp_path / f"server-{framing}.log"
    with log.open("ab") as stderr:
        async with Host.start(
            ["--state-dir", str(state(tmp_path)), "--session", session],
            framing=framing,
            stderr=stderr,
            env=env,
            on_message=seen,
        ) as host:
            yield host
    assert host.process is not None and host.process.returncode is not None
    assert_nothing_left(host.process.pid)
    assert_no_run_survives(seen.run_ids)
    assert "Traceback" not in log.read_text(), log.read_text()


async def task(host: Host, **params: Any) -> dict[str, Any]:
    """A task-mode spawn's final snapshot."""
    result: dict[str, Any] = await host.request("spawn", {"mode": "task", **params})
    return result


def assert_plain(text: str) -> None:
    """What a pipe gets: no colour or cursor escapes, no box drawing, no trailing blanks."""
    assert not ANSI.search(text), repr(text)
    assert not BOX_DRAWING.search(text), text
    assert all(line == line.rstrip() for line in text.splitlines()), repr(text)


async def on_a_terminal(columns: int, *args: str, **env: str) -> str:
    """`subagent-host ARGS...` with stdout on a pseudo-terminal `columns` wide: all it
    wrote there (bounded), once it has exited with status 0."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "subagent_host",
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=terminal,
            stderr=asyncio.subprocess.PIPE,
            env={**{k: v for k, v in environment().items() if k != "COLUMNS"}, **env},
        )
        os.close(terminal)
        terminal = -1
        async with asyncio.timeout(COMMAND_TIMEOUT_S):
            written = await asyncio.to_thread(_read_to_end, controller)
            assert await process.wait() == 0
    finally:
        if terminal != -1:
            os.close(terminal)
        os.close(controller)
    return written.decode().replace("\r\n", "\n")


def _read_to_end(fd: int) -> bytes:
    """Everything until the other side of the pseudo-terminal is closed by all (EIO)."""
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return data
        if not chunk:
            return data
        data += chunk
