"""An agent CLI whose model never answers: it prints its recorded opening lines, then its
recorded retry notice again and again, as a CLI that keeps reconnecting does.

    retrying_agent.py        reads FAKE_AGENT_STREAM: the opening lines, a blank line,
                             then the retry notice (one JSON line)

It runs until it is ended. Its arguments (the backend's own argv) are ignored.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

NOTICE_INTERVAL_S = 0.05  # far shorter than the stall timeout a test sets


def main() -> None:
    opening, notice = Path(os.environ["FAKE_AGENT_STREAM"]).read_text().split("\n\n", 1)
    sys.stdin.read()  # the prompt, to its end, as the real CLIs read it
    sys.stdout.write(opening + "\n")
    sys.stdout.flush()
    while True:
        sys.stdout.write(notice.strip() + "\n")
        sys.stdout.flush()
        time.sleep(NOTICE_INTERVAL_S)  # noqa: TID251 - a plain process, no event loop


if __name__ == "__main__":
    main()
