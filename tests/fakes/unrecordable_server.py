"""The real server, except that the store cannot write a run labelled `unrecordable`.

Usage: python unrecordable_server.py SERVER-ARGS...

The injected failure comes after a short pause on the store's thread, so the
run's child has started by the time the failure is known: the server must end it.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from typing import Final

from subagent_host import cli
from subagent_host.store import writes
from subagent_host.store.rows import RunRow

LABEL: Final = "unrecordable"
PAUSE_S: Final = 1.0

_write_run = writes.write_run


def failing_write_run(db: sqlite3.Connection, instance_id: str, row: RunRow) -> None:
    if row.label == LABEL:
        time.sleep(PAUSE_S)  # noqa: TID251 - the store's own thread: a slow disk, not the loop
        raise sqlite3.OperationalError("disk I/O error (injected by the test)")
    _write_run(db, instance_id, row)


if __name__ == "__main__":
    writes.write_run = failing_write_run
    sys.exit(cli.main(sys.argv[1:]))
