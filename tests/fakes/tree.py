"""Build a process tree of N processes (this one included), print "ready", then wait.

Usage: tree.py N [--ignore-term]. Each process forks up to two children until N
exist; all of them wait for a signal. With --ignore-term every one ignores SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    total = int(sys.argv[1])
    if "--ignore-term" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Breadth-first: process i forks children 2i+1 and 2i+2 while they are < total.
    ready_r, ready_w = os.pipe()
    index = 0
    while True:
        forked = False
        for child_index in (2 * index + 1, 2 * index + 2):
            if child_index < total and os.fork() == 0:
                index = child_index
                forked = True
                break
        if not forked:
            break
    os.write(ready_w, b"x")  # one byte per process: the root counts them
    if index == 0:
        got = 0
        while got < total:
            got += len(os.read(ready_r, total))
        print("ready", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
