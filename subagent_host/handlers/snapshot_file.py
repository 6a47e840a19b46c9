"""A workflow's `snapshotPath`: the run's snapshot, rewritten whole after each step.

The file is replaced atomically (written beside it, flushed to disk, then
renamed over it), so a reader sees the previous snapshot or the new one, never
half of one. It is created with mode 0600: outputs may hold anything the
children printed. The write runs on a worker thread; the event loop never waits
for the disk.

Only a regular file is ever replaced. The rename would put a JSON file in place
of whatever the path names — a FIFO, a socket, a device node (as root, even
`/dev/null`) — so `refusal` is asked when the workflow is planned and again,
on the writing thread, just before each rename: a path that is no longer a
regular file (or a new one) is left alone and the write is skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Callable

from subagent_host.config import ServerConfig
from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.planning.snapshot_path import NO_SERVER_FILES, ServerFiles, refusal
from subagent_host.rpc.wire import make_converter
from subagent_host.runs.state import Run


def server_files(config: ServerConfig) -> ServerFiles:
    """The files of the server running with `config` that no snapshot may replace."""
    log_file = str(config.log_file) if config.log_file is not None else None
    return ServerFiles(state_dir=str(config.state_dir), log_file=log_file)


def snapshot_writer(
    server: ServerFiles = NO_SERVER_FILES,
) -> Callable[[Run, str], asyncio.Future[str | None]]:
    """`write(run, path)`: serialise the run now (on the loop), write it on a thread;
    never over the `server`'s own files.

    The future's result is why the write was skipped (see `replace_file`), or None.
    """
    converter = make_converter()

    def write(run: Run, path: str) -> asyncio.Future[str | None]:
        data = json.dumps(converter.unstructure(run_snapshot(run)), ensure_ascii=False, indent=2)
        return asyncio.ensure_future(
            asyncio.to_thread(replace_file, path, data.encode() + b"\n", server)
        )

    return write


def replace_file(path: str, data: bytes, server: ServerFiles = NO_SERVER_FILES) -> str | None:
    """Write `data` to `path` atomically, mode 0600 (blocking: call it off the loop).

    Returns why nothing was written when `path` is no longer something a
    snapshot may replace (`refusal`), else None; raises OSError if the write fails.
    """
    directory, name = os.path.split(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as file:  # mkstemp creates it 0600
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        # Checked last, right before the rename: the narrowest window for a change.
        problem = refusal(path, server)
        if problem is None:
            os.replace(temporary, path)
            return None
    except BaseException:
        os.unlink(temporary)
        raise
    os.unlink(temporary)
    return problem
