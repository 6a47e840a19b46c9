"""`subagent-host send RUN TEXT [--index N] [--steer]`: a live message to a running run's
interactive child, from another terminal (protocol.md §23.2, §10.1).

Prints the message's id and where it is: `delivered` (written to the child) or `queued`
(until the child's current turn ends). Exit statuses as `terminal/live.py` says: 0 sent,
1 not sent, 3 the server was busy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from subagent_host.rpc.wire import SendResult
from subagent_host.terminal import live
from subagent_host.terminal.options import state_dir_of

NAME: Final = "send"


def main(argv: Sequence[str]) -> int:
    parser = live.live_parser(
        NAME,
        "Send a message to an interactive child of a run a server on this state directory runs.",
        index="the child (default: the run's one interactive child)",
    )
    parser.add_argument("text", metavar="TEXT", help="the message (up to 64 KiB of UTF-8)")
    parser.add_argument(
        "--steer",
        action="store_true",
        help="into the current turn where the child's CLI can take it there (default: queued"
        " until the turn ends)",
    )
    args = parser.parse_args(argv)
    work = live.send(state_dir_of(args), args.run, args.text, args.index, args.steer)
    return live.finish(NAME, work, sent_line)


def sent_line(result: SendResult) -> str:
    """`m-1 delivered`: the message's id (its `input` events carry it) and its state."""
    return f"{result.message_id} {result.state}"
