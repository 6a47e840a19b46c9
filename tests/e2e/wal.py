"""Count the transactions a server has committed, from its write-ahead log, from outside.

SQLite in WAL mode appends each committed transaction to `<db>-wal` as frames;
the last frame of a transaction is its commit frame (a non-zero "database size
after commit" in its header). Frames of the current log carry the salts of the
log's header; frames left from before a checkpoint restarted the log do not.
Reading the file does not touch the database.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Final

WAL_HEADER: Final = 32
FRAME_HEADER: Final = 24


def committed_transactions(wal: Path) -> int:
    """Commit frames of the current log (0 when there is no log yet)."""
    try:
        data = wal.read_bytes()
    except FileNotFoundError:
        return 0
    if len(data) < WAL_HEADER:
        return 0
    page_size = struct.unpack(">I", data[8:12])[0]
    salts = data[16:24]
    commits = 0
    offset = WAL_HEADER
    while offset + FRAME_HEADER + page_size <= len(data):
        header = data[offset : offset + FRAME_HEADER]
        if header[8:16] != salts:
            break  # a frame from before the log was restarted
        if struct.unpack(">I", header[4:8])[0] != 0:
            commits += 1
        offset += FRAME_HEADER + page_size
    return commits
