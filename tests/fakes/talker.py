"""A child that talks on its stdin, as a driven child does: run as
`python talker.py`, it starts a helper that ignores SIGINT and SIGTERM and prints
`ready HELPER_PID`; then, per line it reads, `spawn` starts one more such helper
and prints `spawned PID`, anything else is answered `got LINE`. A SIGINT (to its
group) prints `interrupted` and it reads on; the end of its stdin ends it (exit 0),
its helpers left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

HELPER = ("sleep", "300")


def helper() -> int:
    """Start a helper that ignores SIGINT and SIGTERM from its first instruction on (an
    ignored signal stays ignored across exec); its pid."""
    handlers = {signum: signal.signal(signum, signal.SIG_IGN) for signum in IGNORED}
    try:
        return subprocess.Popen(HELPER).pid
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


IGNORED = (signal.SIGINT, signal.SIGTERM)


def main() -> None:
    # A raw write: the signal may come while a print holds stdout's buffer.
    signal.signal(signal.SIGINT, lambda *_: os.write(1, b"interrupted\n"))
    print("ready", helper(), flush=True)
    for line in sys.stdin:
        said = line.strip()
        if said == "spawn":
            print("spawned", helper(), flush=True)
        else:
            print("got", said, flush=True)


if __name__ == "__main__":
    main()
