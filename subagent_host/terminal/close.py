"""`subagent-host close RUN [--index N]`: end the conversation of a running run's
interactive children (or of child N), from another terminal (protocol.md §23.3, §10.1):
their input closes, they exit as their CLI does at its input's end, and end `completed`.

Prints the run's status line once they ended (as `subagent-host stop` does); a run that
had already ended is nothing to do (exit 0). Exit statuses as `terminal/live.py` says: 0
closed, 1 not closed, 3 the server was busy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from subagent_host.terminal import live
from subagent_host.terminal.options import state_dir_of
from subagent_host.terminal.stop import status_line

NAME: Final = "close"


def main(argv: Sequence[str]) -> int:
    parser = live.live_parser(
        NAME,
        "Close a run's interactive children (their input ends; they end completed) and wait"
        " for their end.",
        index="only this child (default: every interactive child of the run)",
    )
    args = parser.parse_args(argv)
    return live.finish(NAME, live.close(state_dir_of(args), args.run, args.index), status_line)
