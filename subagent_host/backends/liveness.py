"""Whether a recorded process is still the one that was recorded: its pid and start time.

A pid alone names whatever process has it now; together with the start time it
names one process for good. Server records (the store's `instances`) and the
supervisor's own children are checked this way. On Linux the start time is read
from /proc the way psutil computes it (boot time + start ticks), so that no
server imports psutil before its first reply.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Final

from subagent_host.backends.cgroups import boot_time, start_ticks

# psutil's start times have clock-tick resolution (10 ms).
START_TOLERANCE_S: Final = 0.01

_PROC_STAT: Final = sys.platform.startswith("linux")
_BOOT_TIME: Final = boot_time() if _PROC_STAT else 0.0
_CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK") if _PROC_STAT else 100


def process_create_time(pid: int) -> float:
    """The process's start time, exactly as psutil computes it (Linux: one /proc read);
    0.0 once it is gone."""
    if not _PROC_STAT:
        import psutil  # only where /proc cannot tell

        with contextlib.suppress(psutil.Error):
            return psutil.Process(pid).create_time()
        return 0.0
    ticks = start_ticks(pid)
    return 0.0 if ticks is None else _BOOT_TIME + ticks / _CLOCK_TICKS


def this_process() -> tuple[int, float]:
    """This process's pid and start time, as a server registers itself."""
    pid = os.getpid()
    return pid, process_create_time(pid)


def process_is_alive(pid: int, create_time: float) -> bool:
    """True if `pid` still names the process that started at `create_time`."""
    return abs(process_create_time(pid) - create_time) < START_TOLERANCE_S


def tree_usage(pid: int, create_time: float) -> tuple[float, int] | None:
    """CPU seconds and resident bytes of the process and its descendants now; None when
    that process is gone (a pid now another process's is not it: its start time differs).
    For `watch`, which reads the children of other servers."""
    import psutil  # here: a server's start does not import psutil (see the module's text)

    try:
        root = psutil.Process(pid)
        if abs(root.create_time() - create_time) > START_TOLERANCE_S:
            return None
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    cpu, rss = 0.0, 0
    for process in tree:
        try:
            with process.oneshot():
                times = process.cpu_times()
                cpu += times.user + times.system
                rss += process.memory_info().rss
        except psutil.Error:
            continue  # exited between the walk and the read: it counts no more
    return cpu, rss
