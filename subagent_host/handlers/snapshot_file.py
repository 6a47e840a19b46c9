"""A workflow's `snapshotPath`: the run's snapshot, rewritten whole after each step.

The file is replaced atomically (written beside it, flushed to disk, then
renamed over it), so a reader sees the previous snapshot or the new one, never
half of one. It is created with mode 0600: outputs may hold anything the
children printed. The write runs on a worker thread; the event loop never waits
for the disk.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Callable

from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.rpc.wire import make_converter
from subagent_host.runs.state import Run


def snapshot_writer() -> Callable[[Run, str], asyncio.Future[None]]:
    """`write(run, path)`: serialise the run now (on the loop), write it on a thread."""
    converter = make_converter()

    def write(run: Run, path: str) -> asyncio.Future[None]:
        data = json.dumps(converter.unstructure(run_snapshot(run)), ensure_ascii=False, indent=2)
        return asyncio.ensure_future(asyncio.to_thread(replace_file, path, data.encode() + b"\n"))

    return write


def replace_file(path: str, data: bytes) -> None:
    """Write `data` to `path` atomically, mode 0600 (blocking: call it off the loop)."""
    directory, name = os.path.split(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as file:  # mkstemp creates it 0600
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
