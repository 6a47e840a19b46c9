"""`subagent-host permit RUN PERMISSION_ID allow|reject [--always]`: answer a tool use a
running run's interactive child waits on (`approvals: "client"`), from another terminal
(protocol.md §23.4, §10.1). The answer is recorded as given by `client:terminal`.

The option is picked from those the permission offers (its run's `pendingPermissions`):
`allow-once` or `reject-once`, with `--always` `allow-always` or `reject-always`; one the
permission does not offer is refused, never widened. Prints the answer given. Exit
statuses as `terminal/live.py` says: 0 answered, 1 not answered (no such permission
pending included), 3 the server was busy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from subagent_host.rpc.wire import PermitResult
from subagent_host.terminal import live
from subagent_host.terminal.interaction import tool_words
from subagent_host.terminal.options import state_dir_of
from subagent_host.values.interaction import PendingPermission

NAME: Final = "permit"


def main(argv: Sequence[str]) -> int:
    parser = live.live_parser(
        NAME,
        "Answer a permission an interactive child of a run waits on (see `show RUN`).",
        index=None,
    )
    parser.add_argument("permission", metavar="PERMISSION_ID", help="the pending permission")
    parser.add_argument("answer", choices=("allow", "reject"), help="allow or reject the tool use")
    parser.add_argument(
        "--always",
        action="store_true",
        help="allow-always or reject-always (default: this once)",
    )
    args = parser.parse_args(argv)
    work = live.permit(
        state_dir_of(args), args.run, args.permission, args.answer == "allow", args.always
    )
    return live.finish(NAME, work, answered_line)


def answered_line(answered: tuple[PendingPermission, PermitResult]) -> str:
    """`p-1 answered allow-once: Bash (execute): printf x > written.txt`."""
    pending, result = answered
    what = tool_words(pending.name, pending.kind.value, pending.summary)
    return f"{result.permission_id} answered {result.kind}: {what}"
