"""`subagent-host stop RUN [--grace-ms N]`: stop a run a live server on this state
directory owns, from another terminal (protocol.md §7, §10.1).

Exit 0 once the run has stopped (or had already ended: nothing was left to do), 1 when it
could not be stopped, 3 when its server was busy (at its bound of control connections: try
again); the run's final status line on stdout, a failure's one line on stderr.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Final

from subagent_host import SERVER_NAME
from subagent_host.options import add_number
from subagent_host.rpc.wire import RunSnapshot
from subagent_host.terminal.options import state_dir_of, subcommand_parser
from subagent_host.terminal.stopping import StopBusy, StopFailed, stop_run
from subagent_host.terminal.views import duration, plural, short_id
from subagent_host.values import MAX_DURATION_MS

NAME: Final = "stop"
# Distinct from 1 (cannot be stopped): the same command may work in a moment.
EXIT_BUSY: Final = 3


def main(argv: Sequence[str]) -> int:
    parser = subcommand_parser(
        NAME,
        "Stop a run that a server on this state directory runs: SIGTERM to its whole process "
        "tree, the grace, then SIGKILL.",
    )
    parser.add_argument("run", metavar="RUN", help="a run id, or its first 8 or more characters")
    add_number(
        parser,
        "--grace-ms",
        0,
        MAX_DURATION_MS,
        "milliseconds between SIGTERM and SIGKILL (default: the server's --grace-ms)",
    )
    args = parser.parse_args(argv)
    try:
        snapshot = asyncio.run(stop_run(state_dir_of(args), args.run, args.grace_ms))
    except StopFailed as exc:
        print(f"{SERVER_NAME} {NAME}: {exc}", file=sys.stderr)
        return EXIT_BUSY if isinstance(exc, StopBusy) else 1
    print(status_line(snapshot))
    return 0


def status_line(snapshot: RunSnapshot) -> str:
    """`run 1a2b3c4d cancelled after 2.1s: stopped by … (1 child ended by sigterm)`."""
    name = short_id(snapshot.run_id)
    if snapshot.already_terminal:
        return f"run {name} had already ended: {snapshot.status}"
    line = f"run {name} {snapshot.status}"
    if snapshot.duration_ms is not None:
        line += f" after {duration(snapshot.duration_ms / 1000)}"
    if snapshot.reason:
        line += f": {snapshot.reason}"
    ends: dict[str, int] = {}
    for child in snapshot.children:
        if child.stopped_by is not None:
            ends[child.stopped_by] = ends.get(child.stopped_by, 0) + 1
    if ends:
        told = ", ".join(
            f"{plural(n, 'child', 'children')} ended by {how}" for how, n in sorted(ends.items())
        )
        line += f" ({told})"
    return line
