"""`subagent-host logs RUN [-f]`: what a run's children printed and did, in order (protocol.md §7).

From the run's recorded events: each `output` event's text as it streamed, each
`stderr` event's as whole lines marked `stderr│ ` (red on a terminal; `stderr| ` on a
pipe, where no box characters go), an agent child's `message` events (what it said, as
it streamed), each `activity` event as a line of its own (`» tool bash`), and so an
interactive child's turns, live messages and permissions (`» turn end: end_turn`,
`» message m-1 queued: …`, `» permission p-1 answered: allow-once by client:terminal`:
`terminal/interaction.py`); a child that
did not stream (a spawn without `stream`) shows its final output text where it ended.
Where a child ended whose stderr was not streamed, the tail of its stderr that its
record keeps follows, marked the same way. Each line of a run of
several children (tasks, chain, workflow) starts with the child's index (`[1] `). The
last line is the run's outcome: `run 1a2b3c4d failed after 1.2s: command exited with
status 3`. `-f` follows a run that is still going until it ends.

A read-only reader cannot be woken by the servers that write (they are other
processes), so following polls: `PRAGMA data_version` (one cheap read, changed by any
commit) every POLL_INTERVAL_S, and the run's events only when it changed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Final

from rich.console import Console
from rich.text import Text

from subagent_host.backends.liveness import process_is_alive
from subagent_host.runs.state import TERMINAL, ChildRun, Run, RunEvent, RunStatus
from subagent_host.store.browse import StateBrowser
from subagent_host.terminal import views
from subagent_host.terminal.interaction import event_line
from subagent_host.terminal.lines import OpenLines
from subagent_host.terminal.options import add_run_argument, state_dir_of, subcommand_parser
from subagent_host.values import RunKind
from subagent_host.values.events import (
    ActivityEvent,
    ChildEvent,
    InputEvent,
    MessageEvent,
    OutputEvent,
    PermissionEvent,
    PlanEvent,
    StderrEvent,
    TurnEvent,
)

POLL_INTERVAL_S: Final = 0.1
"""How often `-f` looks for new events: a line appears at most this long after it is
recorded (servers record a run's events once per turn of their loop)."""
OWNER_CHECK_S: Final = 1.0
"""How often `-f`, while nothing changes, checks that the server running the run is alive."""
PAGE: Final = 1000
"""Events read at once."""
ACTIVITY_MARK: Final = "» "
HELD_LINE_MAX: Final = 64 * 1024
"""The most of one child's unfinished line held back in a run of several children (so
that lines of children never mix), or of its stderr's (marked line by line); a longer
line is shown in pieces of about this size, each on a line of its own. A single child's
output is written as it comes."""


def main(argv: Sequence[str]) -> int:
    parser = subcommand_parser(
        "logs", "A run's output and activity, in order; with -f, until the run ends."
    )
    add_run_argument(parser, newest_by_default=True)
    parser.add_argument(
        "-f", "--follow", action="store_true", help="follow a running run until it ends"
    )
    return views.guarded(parser, argv, print_logs)


def print_logs(args: argparse.Namespace) -> int:
    with StateBrowser.open(state_dir_of(args)) as browser:
        run = browser.find(args.run)
        several = run.kind is not RunKind.SINGLE  # a [i] prefix on each line
        return _print(browser, run.run_id, Printer(views.console(), several), args.follow)


def _print(browser: StateBrowser, run_id: str, printer: Printer, follow: bool) -> int:
    seq = 0
    while True:
        # Taken before the read: a commit that comes after it is never missed.
        version = browser.data_version()
        run, events = browser.run_with_events(run_id, seq, PAGE)
        if run is None:
            printer.finish(None)
            print(f"subagent-host logs: run {run_id} was deleted", file=sys.stderr)
            return 1
        if events and events[0].seq > seq + 1:
            print(
                f"subagent-host logs: events {seq + 1}..{events[0].seq - 1} of this run are"
                " no longer kept",
                file=sys.stderr,
            )
        for event in events:
            printer.event(event, run)
        if events:
            seq = events[-1].seq
        if len(events) == PAGE:
            continue
        if run.is_terminal or not follow:
            printer.finish(run)
            return 0
        printer.flush_file()
        if not _wait_for_change(browser, run_id, version):
            printer.finish(run)
            print(
                f"subagent-host logs: the server running {run_id} has ended without ending"
                " it (the next server started on this state directory marks it interrupted)",
                file=sys.stderr,
            )
            return 1


def _wait_for_change(browser: StateBrowser, run_id: str, version: int) -> bool:
    """Until anyone has committed to the database since `version` (True), or the run's
    server is gone (False)."""
    checked = time.monotonic()
    while browser.data_version() == version:
        if time.monotonic() - checked >= OWNER_CHECK_S:
            owner = browser.owner(run_id)
            if owner is None or owner.ended_at is not None:
                return False
            if not process_is_alive(owner.pid, owner.create_time):
                return False
            checked = time.monotonic()
        # No event can be awaited: the writers are other processes (see the module's doc).
        time.sleep(POLL_INTERVAL_S)  # noqa: TID251 - no event loop here to block
    return True


class Printer:
    """Events as lines, each child's output cut at its newlines so that lines of several
    children never mix."""

    def __init__(self, out: Console, several: bool) -> None:
        self._out = out
        self._several = several
        self._lines = OpenLines(HELD_LINE_MAX)
        """Per child of several, what it printed after its last newline."""
        self._open: set[int] = set()
        """The one child's, when its output so far ends in the middle of a line."""
        self._stderr_lines = OpenLines(HELD_LINE_MAX)
        """Per child, what it wrote to stderr after its last newline."""
        self._streamed: set[int] = set()
        self._stderr_streamed: set[int] = set()
        """Children whose stderr came as `stderr` events: their stored tail is not shown."""
        self._shown: set[tuple[int, int]] = set()
        """(index, attempt) of each final output already printed."""
        self._stderr_shown: set[tuple[int, int]] = set()
        """(index, attempt) of each stderr tail already printed."""

    def event(self, event: RunEvent, run: Run) -> None:
        match event.payload:
            case OutputEvent(index=index, text=text):
                self._streamed.add(index)
                self._output(index, text)
            case MessageEvent(index=index, text=text, final=final):
                # An agent's own words: its raw lines were not streamed.
                self._streamed.add(index)
                self._output(index, text)
                if final:
                    self._end_line(index)  # a response ends its line, whatever it ended with
            case StderrEvent(index=index, text=text):
                self._stderr_streamed.add(index)
                for line in self._stderr_lines.feed(index, text):
                    self._stderr_line(index, line)
            case ActivityEvent(index=index, text=text):
                self._end_line(index)
                self._activity(index, text)
            case TurnEvent() | InputEvent() | PermissionEvent() as said:
                # An interactive child's conversation: a line of its own, as activity is.
                self._end_line(said.index)
                self._activity(said.index, event_line(said))
            case PlanEvent(index=index, entries=entries):
                # The agent's plan, replaced whole: where it stands, as a line of its own.
                self._end_line(index)
                self._activity(index, views.plan_line(entries))
            case ChildEvent(index=index, status=RunStatus.RUNNING):
                self._stderr_streamed.discard(index)  # an attempt begins: its own stream or tail
            case ChildEvent(index=index, status=status) if status in TERMINAL:
                self._end_line(index)
                self._end_stderr_line(index)
                self._final_output(run, index)
                self._stderr(run, index)
            case _:
                pass  # a run's `status` event, a tool's or usage: nothing a child printed

    def finish(self, run: Run | None) -> None:
        """At the end: the final output and stderr of children whose end was not seen
        (their events are no longer kept, or the run is still going without -f), open
        lines, and the run's outcome."""
        if run is not None:
            for child in run.children:
                if child.status in TERMINAL:
                    self._final_output(run, child.index)
                    self._stderr(run, child.index)
        for index in {*self._open, *self._lines.keys()}:
            self._end_line(index)
        for index in self._stderr_lines.keys():
            self._end_stderr_line(index)
        if run is not None:
            self._out.print(
                Text(outcome_line(run), style=views.STATUS_STYLES.get(str(run.status), "")),
                soft_wrap=True,
            )
        self.flush_file()

    def flush_file(self) -> None:
        self._out.file.flush()

    def _prefix(self, index: int) -> str:
        return f"[{index}] " if self._several else ""

    def _output(self, index: int, text: str) -> None:
        if not text:
            return
        if not self._several:
            # One child: nothing to keep apart, its text goes out as it comes.
            self._out.file.write(text)
            if text.endswith("\n"):
                self._open.discard(index)
            else:
                self._open.add(index)  # an open line, ended by _end_line
            return
        prefix = self._prefix(index)
        lines = self._lines.feed(index, text)
        self._out.file.write("".join(f"{prefix}{line}\n" for line in lines))

    def _end_line(self, index: int) -> None:
        if index in self._open:
            self._open.discard(index)
            self._out.file.write("\n")  # the open line's end: its text is out already
            return
        held = self._lines.take(index)
        if held is not None:
            self._out.file.write(f"{self._prefix(index)}{held}\n")

    def _stderr_line(self, index: int, line: str) -> None:
        """A whole line the child wrote to stderr, marked, on a line of its own."""
        self._end_line(index)
        marked = views.stderr_line(line, terminal=self._out.is_terminal, prefix=self._prefix(index))
        self._out.print(marked, soft_wrap=True)

    def _end_stderr_line(self, index: int) -> None:
        """The end of the child's stderr: its last line, if it had no newline."""
        held = self._stderr_lines.take(index)
        if held is not None:
            self._stderr_line(index, held)

    def _activity(self, index: int, text: str) -> None:
        line = Text(f"{self._prefix(index)}{ACTIVITY_MARK}{' '.join(text.split())}", style="dim")
        self._out.print(line, soft_wrap=True)

    def _stderr(self, run: Run, index: int) -> None:
        """What an ended child wrote to stderr (the tail its record keeps), once per attempt,
        each line marked as stderr; not for a child whose stderr was streamed (its lines
        are shown already, whole)."""
        if index >= len(run.children) or index in self._stderr_streamed:
            return
        child = run.children[index]
        tail = stderr_tail(child)
        if not tail or (index, child.attempt) in self._stderr_shown:
            return
        self._stderr_shown.add((index, child.attempt))
        for line in tail.splitlines():
            self._stderr_line(index, line)

    def _final_output(self, run: Run, index: int) -> None:
        """A child that did not stream: its final text, once per attempt."""
        if index in self._streamed or index >= len(run.children):
            return
        child = run.children[index]
        if child.output is None or (index, child.attempt) in self._shown:
            return
        self._shown.add((index, child.attempt))
        self._output(index, child.output.text)
        self._end_line(index)


def stderr_tail(child: ChildRun) -> str | None:
    """The tail of a child's stderr its record keeps: a command child's, however it ended
    (`output.stderrTail`); a failed agent child's, in its error's data."""
    if child.output is not None and child.output.stderr_tail:
        return child.output.stderr_tail
    tail = (child.error.data or {}).get("stderrTail") if child.error is not None else None
    return tail if isinstance(tail, str) and tail else None


def outcome_line(run: Run) -> str:
    """`run 1a2b3c4d failed after 1.2s: command exited with status 3`; a run still going:
    `run 1a2b3c4d running for 3.0s`."""
    line = f"run {views.short_id(run.run_id)} {run.status}"
    if not run.is_terminal:
        return line + (f" for {views.run_duration(run)}" if run.started_at else "")
    if run.started_at is not None and run.ended_at is not None:
        line += f" after {views.run_duration(run)}"
    said = [run.reason, run.error.message if run.error is not None else None]
    return line + "".join(f": {views.printable(part)}" for part in said if part)
