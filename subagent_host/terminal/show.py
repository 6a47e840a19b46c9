"""`subagent-host show RUN`: one run of any session, as recorded (protocol.md §7).

RUN is a run id or a prefix of one (at least 8 characters) that names one run of the
state directory. The run, its children and how each ended, its error and the tail of
its output are printed for a person; `--json` prints the run's snapshot exactly as
`status {runId}` answers it (`handlers/snapshots.py` and the wire's converter). A run
with interactive children also shows each one's turns (TURN), the end of its
conversation (its `turn`, `input` and `permission` events, `terminal/interaction.py`),
and while it runs, the permissions its children wait on, with how to answer them.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Final

from rich.console import Console
from rich.text import Text

from subagent_host.runs.state import Run
from subagent_host.store.browse import LaunchSummary, StateBrowser
from subagent_host.terminal import views
from subagent_host.terminal.options import add_run_argument, state_dir_of, subcommand_parser
from subagent_host.values.facts import ErrorInfo

TAIL_LINES: Final = 20
"""Lines of a run's output `show` prints: its last ones."""
CONVERSATION_EVENTS: Final = 20
"""An interactive run's newest `turn`, `input` and `permission` events `show` prints."""
CONVERSATION_TYPES: Final = ("turn", "input", "permission")


def main(argv: Sequence[str]) -> int:
    parser = subcommand_parser("show", "One run of this state directory, of any session.")
    add_run_argument(parser, newest_by_default=True)
    parser.add_argument(
        "--json", action="store_true", help="print the run's snapshot as `status` answers it"
    )
    return views.guarded(parser, argv, show_run)


def show_run(args: argparse.Namespace) -> int:
    with StateBrowser.open(state_dir_of(args)) as browser:
        run = browser.find(args.run)
        streamed = "" if run.output else browser.streamed_output(run.run_id)
        launches = browser.launches(run.run_id)
        interactive = any(child.turn is not None for child in run.children)
        said = (
            browser.events_of(run.run_id, CONVERSATION_TYPES, CONVERSATION_EVENTS)
            if interactive
            else []
        )
        asked = (
            browser.events_of(run.run_id, ("permission",))
            if interactive and not run.is_terminal
            else []
        )
    if args.json:
        # The wire's types and converter for --json only: they take a good part of a
        # plain `show`'s start.
        from subagent_host.handlers.snapshots import run_snapshot
        from subagent_host.rpc.wire import make_converter

        return views.print_json(make_converter().unstructure(run_snapshot(run)))
    out = views.console()
    describe(out, run)
    children(out, run, launches)
    if interactive:
        # Imported only for such a run: a plain `show` loads no event types.
        from subagent_host.terminal.show_conversation import conversation, pending

        conversation(out, run, said, CONVERSATION_EVENTS)
        pending(out, run, asked)
    errors(out, run)
    worktrees(out, run)
    output_tail(out, run, streamed)
    return 0


def describe(out: Console, run: Run) -> None:
    fields: list[tuple[str, str | Text]] = [
        ("run", run.run_id),
        ("session", run.session_id),
        ("kind", str(run.kind)),
        ("status", views.status_text(str(run.status))),
        ("label", run.label or ""),
        ("workflow", run.workflow.name if run.workflow else ""),
        ("created", views.full_moment(run.created_at)),
        ("started", views.full_moment(run.started_at)),
        ("ended", views.full_moment(run.ended_at)),
        ("took", views.run_duration(run, datetime.now(UTC))),
        ("tokens", views.tokens(run.usage)),
        ("cost", views.cost(run.usage)),
        ("reason", run.reason or ""),
        ("limit", run.reached_limit or ""),
        ("error", _error_line(run.error) if run.error else ""),
        ("admitted by", run.admitted_by),
        ("egress", "consented" if run.egress_consent else ""),
    ]
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        if value and value != "-":
            out.print(Text.assemble((name.ljust(width), "bold"), "  ", value))


def children(out: Console, run: Run, launches: Mapping[int, LaunchSummary]) -> None:
    if not run.children:
        return
    out.print()
    # TURN only for a run with interactive children: turns begun, running or waiting.
    turns = any(child.turn is not None for child in run.children)
    grid = views.table(
        out,
        "#",
        "BACKEND",
        "STATUS",
        *(("TURN",) if turns else ()),
        "ATTEMPT",
        "TOOK",
        "ENDED BY",
        "TOKENS",
        "COST",
        "CPU",
        "PEAK RSS",
        "WHAT",
    )
    now = datetime.now(UTC)
    for child in run.children:
        resources = child.resources
        turn = f"{child.turn.count} {child.turn.state}" if child.turn is not None else "-"
        views.add_row(
            grid,
            str(child.index),
            child.backend,
            views.status_text(str(child.status)),
            *((turn,) if turns else ()),
            str(child.attempt),
            views.run_duration(child, now),
            views.how_it_ended(child),
            views.tokens(child.usage),
            views.cost(child.usage),
            f"{resources.cpu_seconds:.2f}s" if resources else "-",
            views.size(resources.peak_rss_bytes if resources else None),
            views.shorten(child.label or views.child_head(child, launches.get(child.index))),
        )
    views.show_table(out, grid)


def errors(out: Console, run: Run) -> None:
    """Each child's error (the run's own is in its description), with the end of what
    the child wrote to stderr when the error kept it."""
    for child in run.children:
        if child.error is None:
            continue
        out.print()
        out.print(Text.assemble((f"child {child.index} error", "bold red"), "  "), end="")
        out.print(_error_line(child.error), markup=False, highlight=False)
        for line in _stderr_tail(child.error):
            out.print(f"  {line}", markup=False, highlight=False)


def worktrees(out: Console, run: Run) -> None:
    """Each isolated child's worktree: its branch, what the child left there, where."""
    for child in run.children:
        space = child.workspace
        if space is None:
            continue
        left = views.workspace_summary(space) if space.kept else "removed: nothing was left in it"
        out.print()
        out.print(Text.assemble((f"child {child.index} worktree", "bold"), "  "), end="")
        out.print(f"{space.branch}  {left}  {space.path}", markup=False, highlight=False)


def output_tail(out: Console, run: Run, streamed: str) -> None:
    text = run.output.text if run.output else _children_output(run) or streamed
    out.print()
    if not text:
        out.print(Text("no output recorded", style="dim"))
        return
    shown, before = views.tail(text, TAIL_LINES)
    heading = f"output (last {TAIL_LINES} lines)" if before else "output"
    out.print(Text(heading, style="bold"))
    out.print(shown, markup=False, highlight=False, soft_wrap=True)


def _children_output(run: Run) -> str:
    outputs = [child.output.text for child in run.children if child.output]
    return "".join(outputs)


def _error_line(error: ErrorInfo) -> str:
    return f"{error.code}: {error.message}"


def _stderr_tail(error: ErrorInfo, lines: int = 5) -> Iterable[str]:
    tail = (error.data or {}).get("stderrTail")
    if not isinstance(tail, str) or not tail.strip():
        return []
    shown, _before = views.tail(tail.rstrip("\n"), lines)
    return shown.splitlines()
