"""How a child process ended: its exit status, and whether the stop sequence ended it.

The supervisor produces these; the backends' output parsers and the run
settling read them. A module of its own so that the backend interface
(`base.py`) and the parsers need not import the supervisor.
"""

from __future__ import annotations

import enum

import attrs


@attrs.frozen
class ProcessExit:
    """How the direct child ended: an exit code, or the signal that killed it."""

    exit_code: int | None
    signal: int | None

    @classmethod
    def from_returncode(cls, returncode: int) -> ProcessExit:
        if returncode < 0:
            return cls(exit_code=None, signal=-returncode)
        return cls(exit_code=returncode, signal=None)


class StoppedBy(enum.StrEnum):
    """How the direct child ended: on its own, or by which signal of the stop sequence.

    Only the direct child counts: a child that exited on its own is `exit` even
    when what it left behind needed SIGKILL (that shows in `leftovers_ended`).
    A signal from elsewhere (the OOM killer, a user's `kill`) is `exit` too: the
    exit status names it.
    """

    EXIT = "exit"
    SIGTERM = "sigterm"  # it was running when the stop sequence sent SIGTERM
    SIGKILL = "sigkill"  # it was still running when the grace was over
