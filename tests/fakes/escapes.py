"""Leave the process group on purpose, then print "ready PID" and wait (or exit).

Usage: escapes.py setsid   — a grandchild that calls setsid() (leaves the group)
       escapes.py daemon   — a double-forked daemon: its parent exits at once, so
                             it is an orphan (reparented to the nearest subreaper)
       escapes.py brief    — such a daemon that exits on its own once reported
       escapes.py detach   — such a daemon with its stdio on /dev/null, and this
                             process exits 0 once it has reported it: the run
                             completes while the daemon lives on
       escapes.py memory MIB SECONDS — hold MIB MiB (written, so resident) for
                             SECONDS, then exit 0
       escapes.py burn SECONDS — a grandchild burns SECONDS of CPU; this process
                             waits for its end without reaping it, then exits 0

Every process that stays reports its pid on stdout (`ready PID`) before it waits.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def main() -> None:
    mode = sys.argv[1]
    if mode == "memory":
        held = b"x" * (int(sys.argv[2]) * 1024 * 1024)
        time.sleep(float(sys.argv[3]))  # noqa: TID251 - a plain process, no event loop
        print(len(held), flush=True)
        return
    if mode == "burn":
        done_r, done_w = os.pipe()
        if os.fork() == 0:
            os.close(done_r)
            end = time.process_time() + float(sys.argv[2])
            while time.process_time() < end:
                pass
            os._exit(0)  # closes done_w: the parent reads EOF
        os.close(done_w)
        os.read(done_r, 1)  # the burner is never reaped here: its CPU is not in our rusage
        return
    report_r, report_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if mode in ("daemon", "brief", "detach") and os.fork() != 0:
            os._exit(0)  # the middle process exits: the daemon is orphaned
        if mode == "detach":
            quiet = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(quiet, fd)
        os.write(report_w, f"{os.getpid()}\n".encode())
        if mode == "brief":
            os._exit(0)
        os.environ.clear()  # the marker must still be found in its initial environment
        while True:
            signal.pause()
    os.close(report_w)
    pid = os.read(report_r, 64).decode().strip()
    if mode in ("daemon", "brief", "detach"):
        os.wait()  # reap the middle process
    print(f"ready {pid}", flush=True)
    if mode == "detach":
        return
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
