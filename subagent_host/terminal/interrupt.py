"""`subagent-host interrupt RUN [--index N]`: end the current turn of a running run's
interactive child, not the child (protocol.md §23.3, §10.1).

Prints what it did: `interrupted turn 2 of child 0`, or that the child was waiting for a
message and nothing was done. Exit statuses as `terminal/live.py` says: 0 done (nothing to
interrupt included), 1 not done, 3 the server was busy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from subagent_host.rpc.wire import InterruptResult
from subagent_host.terminal import live
from subagent_host.terminal.options import state_dir_of

NAME: Final = "interrupt"


def main(argv: Sequence[str]) -> int:
    parser = live.live_parser(
        NAME,
        "End the current turn of a run's interactive child; the child stays, waiting for the"
        " next message.",
        index="the child (default: the run's one interactive child)",
    )
    args = parser.parse_args(argv)
    work = live.interrupt(state_dir_of(args), args.run, args.index)
    return live.finish(NAME, work, interrupted_line)


def interrupted_line(result: InterruptResult) -> str:
    turn = result.turn
    if result.interrupted:
        return f"interrupted turn {turn.count}"
    return f"nothing to interrupt: the child is {turn.state} after turn {turn.count}"
