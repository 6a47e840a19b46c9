"""Processes a case learnt of, read from /proc: alive or gone, and ended by pid.

A pid is always kept with its start time, so a pid the kernel reused for an
unrelated process is never taken for the one a case started, nor signalled.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import attrs

PROC = Path("/proc")


@attrs.frozen
class Pid:
    pid: int
    start: int  # clock ticks after boot (field 22 of /proc/PID/stat)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process, or None when there is none."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name is in parentheses and may hold spaces or parentheses itself.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[19])


def identify(pid: int) -> Pid | None:
    """The pid with its start time, or None if no such process exists now."""
    stat = _stat(pid)
    return None if stat is None else Pid(pid, stat[2])


def alive(process: Pid) -> bool:
    """Whether that very process still exists and is not a zombie (already ended)."""
    stat = _stat(process.pid)
    return stat is not None and stat[2] == process.start and stat[0] not in ("Z", "X")


def descendants(root: int) -> list[Pid]:
    """Every live process below `root`, read from /proc at once."""
    parents: dict[int, list[tuple[int, int]]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[0] not in ("Z", "X"):
                parents.setdefault(stat[1], []).append((int(entry.name), stat[2]))
    found: list[Pid] = []
    stack = [root]
    while stack:
        for pid, start in parents.get(stack.pop(), []):
            found.append(Pid(pid, start))
            stack.append(pid)
    return found


def kill(process: Pid) -> None:
    """SIGKILL that process, if it is still the one we mean."""
    if alive(process):
        try:
            os.kill(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
