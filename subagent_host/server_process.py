"""Start a subagent-host server as a child process, its stdin and stdout piped to us.

The one way a client starts a server: `Host.start` uses it, and so do the faces that
start their server first of all (`subagent-host run`, `subagent-host mcp`), before
they import the client library and the rest of what they need, so that those imports
run while the server starts (a server takes about half a second to its first
answer), then hand the process to `Host.adopt`. Imports only the standard library:
whatever imports this has paid for nothing else yet.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

StreamTarget = int | IO[Any] | None
"""Where the server's stderr goes: a file, a descriptor, `subprocess.DEVNULL`, or None
(ours)."""


def server_command(args: Sequence[str] = (), program: Sequence[str] | None = None) -> list[str]:
    """The command line of a server with options `args`: `program` (default: this
    installation's, `python -m subagent_host`), then `args`."""
    return [*(program or (sys.executable, "-m", "subagent_host")), *args]


async def start_server_process(
    command: Sequence[str],
    *,
    stderr: StreamTarget = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    own_session: bool = False,
) -> asyncio.subprocess.Process:
    """Start `command` with piped stdin and stdout (see `Host.start` for `own_session`).

    Raises OSError when it cannot be started. The caller owns the process: it hands it
    to `Host.adopt`, whose `aclose()` ends it, or ends it itself.
    """
    return await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=own_session,
    )
