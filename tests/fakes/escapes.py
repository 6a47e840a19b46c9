"""Leave the process group on purpose, then print "ready PID" and wait.

Usage: escapes.py setsid   — a grandchild that calls setsid() (leaves the group)
       escapes.py daemon   — a double-forked daemon: its parent exits at once, so
                             it is an orphan (reparented to the nearest subreaper)
       escapes.py brief    — such a daemon that exits on its own once reported
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    mode = sys.argv[1]
    report_r, report_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if mode in ("daemon", "brief") and os.fork() != 0:
            os._exit(0)  # the middle process exits: the daemon is orphaned
        os.write(report_w, f"{os.getpid()}\n".encode())
        if mode == "brief":
            os._exit(0)
        os.environ.clear()  # the marker must still be found in its initial environment
        while True:
            signal.pause()
    os.close(report_w)
    pid = os.read(report_r, 64).decode().strip()
    if mode in ("daemon", "brief"):
        os.wait()  # reap the middle process
    print(f"ready {pid}", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
