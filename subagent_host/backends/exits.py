"""How a child process ended: its exit status, and whether the stop sequence ended it.

The supervisor produces these; the backends' output parsers and the run
settling read them. A module of its own so that the backend interface
(`base.py`) and the parsers need not import the supervisor.
"""

from __future__ import annotations

import attrs

# Reported on the wire too, so declared with the values the wire may import.
from subagent_host.values.choices import StoppedBy as StoppedBy


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
