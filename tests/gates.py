"""A gate a test opens: a FIFO a child waits on until the test writes a line to it.

A child that must provably still run when something else happens (an answer, an event)
blocks on the gate; the test releases it when it has seen what it waits for. No sleep:
the child ends exactly when the test says so.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def gate_at(path: Path) -> Iterator[int]:
    """A FIFO at `path`, held open for writing (O_RDWR never waits for a reader): a line
    written to the descriptor waits in the FIFO for whichever gated child opens it,
    whenever it does."""
    os.mkfifo(path, 0o600)
    fd = os.open(path, os.O_RDWR)
    try:
        yield fd
    finally:
        os.close(fd)


def gated_line(gate: Path) -> str:
    """A shell line that ends once a line arrives on `gate`, printing `released LINE`."""
    return f'read line < "{gate}"; echo "released $line"'
