"""A real terminal for tests: one tmux server on a private socket, one window running the
command under test, its screen read back with `capture-pane` and keys typed with
`send-keys`. Only that server is ever killed, and everything it ran is proven gone."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Final

import psutil
import pytest

from tests.waits import still_running

TMUX: Final = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
SCREEN_POLL_S: Final = 0.1
"""How often the screen is read while a test waits for it to show something."""


class Terminal:
    """One tmux window of a private server."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        self.last = ""
        """The screen as last read (in a failed wait's message)."""

    async def tmux(self, *args: str) -> str:
        assert TMUX is not None
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        process = await asyncio.create_subprocess_exec(
            TMUX,
            "-L",
            self.socket,
            "-f",
            os.devnull,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        async with asyncio.timeout(10):
            out, err = await process.communicate()
        assert process.returncode == 0, (args, err.decode())
        return out.decode()

    async def screen(self) -> str:
        self.last = await self.tmux("capture-pane", "-p", "-t", "watch")
        return self.last

    async def keys(self, *keys: str) -> None:
        await self.tmux("send-keys", "-t", "watch", *keys)

    async def shows(self, pattern: str, timeout_s: float = 15.0) -> re.Match[str]:
        """Wait until the screen matches `pattern` (a regex); the match."""
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    found = re.search(pattern, await self.screen(), re.MULTILINE)
                    if found:
                        return found
                    await asyncio.sleep(SCREEN_POLL_S)  # the screen cannot be awaited
        except TimeoutError:
            raise AssertionError(f"the screen never showed {pattern!r}:\n{self.last}") from None

    async def pane_pid(self) -> int:
        return int((await self.tmux("display-message", "-p", "-t", "watch", "#{pane_pid}")).strip())


@contextlib.asynccontextmanager
async def terminal(
    command: Sequence[str], width: int = 150, height: int = 30
) -> AsyncIterator[Terminal]:
    """`command` running in a fresh terminal `width` x `height`; afterwards the tmux server
    is gone and so is every process it ran."""
    term = Terminal(f"subagent-host-watch-test-{uuid.uuid4().hex[:12]}")
    await term.tmux(
        "new-session", "-d", "-s", "watch", "-x", str(width), "-y", str(height), *command
    )
    server = psutil.Process(int((await term.tmux("display-message", "-p", "#{pid}")).strip()))
    processes = [server]
    try:
        with contextlib.suppress(psutil.Error):
            pane = psutil.Process(await term.pane_pid())
            processes += [pane]
        yield term
    finally:
        with contextlib.suppress(psutil.Error):
            processes += server.children(recursive=True)
        with contextlib.suppress(AssertionError):
            await term.tmux("kill-server")
        socket_dir = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"
        (socket_dir / term.socket).unlink(missing_ok=True)  # a killed server leaves it
        left = await still_running(processes, timeout_s=10)
        assert left == [], f"processes of the terminal left behind: {left}"
