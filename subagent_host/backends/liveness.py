"""Whether a recorded process is still the one that was recorded: its pid and start time.

A pid alone names whatever process has it now; together with the start time it
names one process for good. Server records (the store's `instances`) are
checked this way before their runs are called the runs of a dead server.
"""

from __future__ import annotations

from typing import Final

import psutil

# psutil's start times have clock-tick resolution (10 ms).
START_TOLERANCE_S: Final = 0.01


def this_process() -> tuple[int, float]:
    """This process's pid and start time, as a server registers itself."""
    me = psutil.Process()
    return me.pid, me.create_time()


def process_is_alive(pid: int, create_time: float) -> bool:
    """True if `pid` still names the process that started at `create_time`."""
    try:
        return abs(psutil.Process(pid).create_time() - create_time) < START_TOLERANCE_S
    except psutil.Error:
        return False
