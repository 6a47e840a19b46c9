"""psutil, imported when a process is first looked at, not with the modules that use it.

Its import costs 15-20 ms of every server's start, before the first reply. The
modules that start, find and end child trees (supervisor.py, trees.py,
termination.py) take `psutil` from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


class _OnFirstUse:
    """Forwards every attribute to psutil, imported on the first one. The import lock
    makes two threads' first uses safe."""

    def __getattr__(self, name: str) -> Any:
        import psutil

        return getattr(psutil, name)


if TYPE_CHECKING:
    import psutil as psutil
else:
    psutil = _OnFirstUse()
