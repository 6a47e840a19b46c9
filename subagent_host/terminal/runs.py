"""`subagent-host runs`: the recent runs of a state directory, of every session (protocol.md §7).

It reads the database read-only (`store/browse.py`), so it works while any number of
servers write, and needs none to run. Newest first; `--json` prints the same runs as
`RunLine` objects, camelCase without null members, as the wire writes its types.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

import attrs

from subagent_host.options import add_number, session_id
from subagent_host.store.browse import BrowsedRun, NoHistory, StateBrowser
from subagent_host.terminal import views
from subagent_host.terminal.options import state_dir_of, subcommand_parser
from subagent_host.values.copying import shared
from subagent_host.values.durations import duration_ms
from subagent_host.values.facts import Usage

DEFAULT_LIMIT: Final = 20
MAX_LIMIT: Final = 1_000_000


@attrs.frozen
class RunLine:
    """One run as `runs --json` prints it (field names camelCase, absent rather than null)."""

    run_id: str
    session_id: str
    kind: str
    status: str
    created_at: datetime
    head: str
    """What it ran: its workflow's name, or its first child's command line or prompt head
    (backend and agent for an agent child recorded before prompt heads were kept), and
    `(+N more)` for further children."""
    children: int
    """How many children it has (a workflow's so far)."""
    instance_id: str
    """The server process that recorded it (`instances` of the state directory)."""
    label: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    duration_ms: int | None = None
    usage: Usage | None = None
    """Every attempt of every child that reported usage, summed (as its snapshot's
    `usage`); `costUsd` only when every one of them reported a cost."""


def main(argv: Sequence[str]) -> int:
    parser = subcommand_parser(
        "runs", "The recent runs of this state directory, of every session, newest first."
    )
    parser.add_argument("--session", type=session_id, metavar="ID", help="only this session's runs")
    add_number(
        parser, "--limit", 1, MAX_LIMIT, f"at most N runs (default {DEFAULT_LIMIT})", DEFAULT_LIMIT
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print a JSON array of runs")
    output.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only the run ids, one per line (for $(...) in a shell)",
    )
    return views.guarded(parser, argv, list_runs)


def list_runs(args: argparse.Namespace) -> int:
    state_dir = state_dir_of(args)
    try:
        with StateBrowser.open(state_dir) as browser:
            lines = [line_of(found, browser) for found in browser.runs(args.session, args.limit)]
    except NoHistory:
        lines = []
    if args.quiet:
        print("".join(f"{line.run_id}\n" for line in lines), end="")
        return 0
    if args.json:
        # The wire's converter for --json only: it takes a good part of a plain `runs`'s start.
        from subagent_host.rpc.wire import make_converter

        converter = make_converter()
        return views.print_json([converter.unstructure(line) for line in lines])
    if not lines:
        whose = f" of session {args.session}" if args.session else ""
        print(f"no runs recorded in {state_dir}{whose}")
        return 0
    return show(lines)


def line_of(found: BrowsedRun, browser: StateBrowser) -> RunLine:
    run = found.run
    return shared(
        RunLine,
        run,
        kind=str(run.kind),
        status=str(run.status),
        head=views.launch_head(run, browser.launches(run.run_id)),
        children=len(run.children),
        instance_id=found.instance_id,
        duration_ms=duration_ms(run.started_at, run.ended_at),
        usage=run.usage,
    )


def show(lines: Sequence[RunLine]) -> int:
    out = views.console()
    grid = views.table(
        out, "RUN", "SESSION", "KIND", "STATUS", "STARTED", "TOOK", "TOKENS", "COST", "WHAT"
    )
    now = datetime.now(UTC)
    # A session id may be as long as a run id: shown as run ids are, by a prefix.
    sessions = views.short_names(line.session_id for line in lines)
    for line in lines:
        views.add_row(
            grid,
            views.short_id(line.run_id),
            sessions[line.session_id],
            line.kind,
            views.status_text(line.status),
            views.moment(line.started_at or line.created_at, now),
            views.elapsed(line.started_at, line.ended_at, now),
            views.tokens(line.usage),
            views.cost(line.usage),
            views.shorten(line.label or line.head),
        )
    views.show_table(out, grid)
    return 0
