"""How runs read for a person: short ids, durations, token counts, plurals.

Every terminal subcommand words these the same way, so they live here once.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from subagent_host.values.choices import PlanStatus
from subagent_host.values.facts import Usage, Workspace

# The server counts things in its messages too: the word lives in values, shared.
from subagent_host.values.plurals import plural as plural

if TYPE_CHECKING:  # `run` uses these words without reading the state directory
    # `runs` and `show` read history without loading the events (loaded on first use).
    from subagent_host.runs.state import ChildRun, Run
    from subagent_host.store.browse import LaunchSummary
    from subagent_host.values.events import PlanEntry

SHORT_ID: Final = 8
"""Characters of a run id shown: the shortest prefix `show`, `logs` and `stop` accept."""


def short_id(run_id: str) -> str:
    return run_id[:SHORT_ID]


def short_names(names: Iterable[str]) -> dict[str, str]:
    """Each name shortened as a run id is (its first SHORT_ID characters), longer where
    that would leave two of `names` looking alike: the shortest prefix of at least
    SHORT_ID characters that no other of them starts with (or the whole name)."""
    unique = sorted(set(names))
    shown: dict[str, str] = {}
    for i, name in enumerate(unique):
        # In sorted order, the names sharing most of a prefix with this one are its neighbours.
        common = max(
            (
                _common_prefix(name, other)
                for other in unique[max(0, i - 1) : i + 2]
                if other != name
            ),
            default=0,
        )
        shown[name] = name[: max(SHORT_ID, common + 1)]
    return shown


def _common_prefix(one: str, other: str) -> int:
    size = 0
    for a, b in zip(one, other, strict=False):
        if a != b:
            break
        size += 1
    return size


def elapsed(start: datetime | None, end: datetime | None, now: datetime | None = None) -> str:
    """From start to end (or to now while it goes on): `0.4s`, `12s`, `3m04s`, `2h05m`;
    `-` when it never started."""
    if start is None:
        return "-"
    seconds = max(0.0, ((end or now or datetime.now(UTC)) - start).total_seconds())
    return duration(seconds)


def duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def count(value: int) -> str:
    """`950`, `12.3k`, `4.1M`: a token count in a column."""
    if value < 1000:
        return str(value)
    if value < 1_000_000:
        return f"{value / 1000:.1f}k"
    return f"{value / 1_000_000:.1f}M"


def tokens(usage: Usage | None) -> str:
    """`1.2k in, 340 out` (`-` when unknown)."""
    if usage is None:
        return "-"
    return f"{count(usage.input_tokens)} in, {count(usage.output_tokens)} out"


def cost(usage: Usage | None) -> str:
    """`$0.0123` (`-` when unknown)."""
    if usage is None or usage.cost_usd is None:
        return "-"
    return f"${usage.cost_usd:.4f}"


def run_tokens(run: Run) -> str:
    """The tokens of every attempt of every child of the run."""
    return tokens(run.usage)


# --- what a run is, in a few words --------------------------------------------------------

HEAD_CHARS: Final = 60
"""The most characters of a run's label or command/prompt head shown in a listing."""


def shorten(text: str, width: int = HEAD_CHARS) -> str:
    """`text` on one line, at most `width` characters (an ellipsis marks a cut)."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def plan_line(entries: Sequence[PlanEntry]) -> str:
    """An agent's plan on one line: how many of its steps are done, and the one in
    progress (`plan: 1/3 done, now: run the tests`)."""
    done = sum(entry.status is PlanStatus.COMPLETED for entry in entries)
    line = f"plan: {done}/{len(entries)} done"
    now = next((e for e in entries if e.status is PlanStatus.IN_PROGRESS), None)
    return line + (f", now: {shorten(printable(now.content))}" if now is not None else "")


def child_head(child: ChildRun, launch: LaunchSummary | None) -> str:
    """What a child ran, on one line: its command line, or its prompt's first line, or
    (for an agent child recorded before prompt heads were kept) its backend and agent or
    model."""
    if launch is not None and launch.backend == "command" and launch.argv:
        return printable(shlex.join(launch.argv)).replace("\n", " ")
    if child.prompt_head:
        return f"{child.backend}: {child.prompt_head}"
    if launch is not None and launch.agent:
        return f"{child.backend} agent {launch.agent}"
    if launch is not None and launch.model:
        return f"{child.backend} {launch.model}"
    return child.backend


def launch_head(run: Run, launches: Mapping[int, LaunchSummary]) -> str:
    """What a run ran, in a few words: its workflow's name, or what its first child ran
    (and how many more it had). A listing shows the run's label instead when it has one."""
    if run.workflow is not None:
        return f"workflow {run.workflow.name}"
    if not run.children:
        return "-"
    first = child_head(run.children[0], launches.get(run.children[0].index))
    more = len(run.children) - 1
    return first + (f" (+{more} more)" if more else "")


STATUS_STYLES: Final[Mapping[str, str]] = {
    "queued": "dim",
    "running": "cyan",
    "completed": "green",
    "failed": "red",
    "timed-out": "red",
    "cancelled": "yellow",
    "interrupted": "yellow",
    "limit-reached": "yellow",
    "stopping": "red",  # `run`'s live line, once it asked the server to stop the run
}


def status_text(status: str) -> Text:
    """A status, coloured by how it went (on a terminal that shows colours)."""
    return Text(status, style=STATUS_STYLES.get(status, ""))


def moment(when: datetime | None, now: datetime | None = None) -> str:
    """A moment in local time: `14:03:27` today, `2026-11-30 14:03` before; `-` if none."""
    if when is None:
        return "-"
    local = when.astimezone()
    today = (now or datetime.now(UTC)).astimezone().date()
    return local.strftime("%H:%M:%S" if local.date() == today else "%Y-%m-%d %H:%M")


def full_moment(when: datetime | None) -> str:
    """A moment in local time, whole: `2026-11-30 14:03:27 CET`; `-` if none."""
    return "-" if when is None else when.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def run_duration(run: Run | ChildRun, now: datetime | None = None) -> str:
    """From start to end, or so far while it goes on."""
    return elapsed(run.started_at, run.ended_at, now)


def how_it_ended(child: ChildRun) -> str:
    """`exit 0`, `exit 3`, `SIGKILL, stopped by sigkill`: its process's end (`-` before)."""
    parts = []
    if child.exit_code is not None:
        parts.append(f"exit {child.exit_code}")
    if child.signal:
        parts.append(signal.Signals(child.signal).name)
    if child.stopped_by is not None and str(child.stopped_by) != "exit":
        parts.append(f"stopped by {child.stopped_by}")
    return ", ".join(parts) or "-"


def tail(text: str, lines: int = 20) -> tuple[str, int]:
    """The last `lines` lines of `text`, and how many lines came before them."""
    every = text.splitlines()
    return "\n".join(every[-lines:]), max(0, len(every) - lines)


# --- printing -----------------------------------------------------------------------------


def console() -> Console:
    """A rich console on stdout: colours and boxes on a terminal only (rich turns colours
    off when it is not one, or with NO_COLOR); on a pipe, wide enough that nothing is
    wrapped or cut."""
    return Console(
        file=sys.stdout,
        width=None if sys.stdout.isatty() else PIPE_WIDTH,
        highlight=False,
        emoji=False,  # `:smile:` in a child's output is printed as it was written
    )


PIPE_WIDTH: Final = 100_000
"""Columns a pipe is taken to have: a line is never wrapped where a script reads it."""


COLUMN_GAP: Final = 2
"""Spaces between two columns of a table."""
MIN_LAST_COLUMN: Final = 8
"""The narrowest a table's last column is cut to on a narrow terminal."""


def table(out: Console, *columns: str) -> Table:
    """A table for `show_table`: ruled under its header on a terminal, plain aligned
    columns (two spaces apart, no box characters) on a pipe. Its last column is the one
    that may be cut short (`…`) to fit a terminal's width: put the long text there."""
    grid = Table(
        box=box.SIMPLE_HEAD if out.is_terminal else None,
        show_edge=False,
        pad_edge=False,
        # Two spaces apart either way: a cell's padding and the rule's column separator on
        # a terminal, both cells' padding on a pipe.
        collapse_padding=out.is_terminal,
        header_style="bold",
    )
    for name in columns:
        grid.add_column(name, no_wrap=True, overflow="ellipsis")
    return grid


def add_row(grid: Table, *cells: str | Text) -> None:
    """A row whose strings are shown as they are: a run's label or command may hold
    `[...]`, which rich would otherwise read as markup."""
    grid.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in cells))


def _cell_width(cell: object) -> int:
    return cell_len(cell.plain if isinstance(cell, Text) else str(cell))


def show_table(out: Console, grid: Table) -> None:
    """Print a table; on a pipe without the spaces rich pads its last column with."""
    if out.is_terminal:
        # Rich would shrink every column alike (the narrow ones to nothing): the last
        # one gets what the others leave.
        *fixed, last = grid.columns
        widths = [max([cell_len(str(c.header))] + [_cell_width(x) for x in c.cells]) for c in fixed]
        room = out.width - sum(widths) - COLUMN_GAP * len(fixed)
        last.max_width = max(MIN_LAST_COLUMN, room)
        out.print(grid)
        return
    with out.capture() as captured:
        out.print(grid)
    out.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


SIGPIPE_STATUS: Final = 128 + signal.SIGPIPE
INTERRUPTED_STATUS: Final = 128 + signal.SIGINT


def print_json(value: Any) -> int:
    """`value` as one line of JSON (UTF-8 as is), for `--json`."""
    print(json.dumps(value, ensure_ascii=False))
    return 0


def reader_gone() -> int:
    """The status to end with once stdout's reader has gone (`| head`): 141, as a process
    killed by SIGPIPE. What is still buffered for the closed pipe is dropped, not reported
    as a second error when Python flushes stdout at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return SIGPIPE_STATUS


def guarded(
    parser: argparse.ArgumentParser,
    argv: Sequence[str],
    body: Callable[[argparse.Namespace], int],
) -> int:
    """Run a subcommand's body on its parsed arguments: a state directory it cannot read
    ends it with 1 and one line on stderr (`subagent-host show: ...`), a reader that
    goes away (`| head`) quietly with 141, as a pipeline's writer ends, and Ctrl-C with
    130 and no traceback."""
    from subagent_host.store.browse import BrowseError  # loaded already by the body's module

    args = parser.parse_args(argv)
    try:
        status = body(args)
        sys.stdout.flush()
        return status
    except BrowseError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return reader_gone()
    except KeyboardInterrupt:
        return INTERRUPTED_STATUS


def size(value: int | None) -> str:
    """`512K`, `48.2M`, `1.3G`: memory in a column (`-` when unknown or none was seen)."""
    if not value:
        return "-"
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20)):
        if value >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{max(1, value >> 10)}K"


# A child's text may carry terminal escapes and control characters: shown as they are,
# they would move the cursor or recolour a view drawn around them.
_ESCAPES: Final = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|.)?")
_CONTROLS: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """The text without terminal escapes and control characters (newlines and tabs kept; a
    carriage return starts a new line, as the line it rewrites would show)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", _ESCAPES.sub("", lines))


# What marks a line a child wrote to stderr (`logs`, and `run` on a terminal): on a
# terminal, in red; on a pipe, where no box characters go.
STDERR_MARK: Final = "stderr│ "
STDERR_PIPE_MARK: Final = "stderr| "


def stderr_line(line: str, *, terminal: bool, prefix: str = "") -> Text:
    """One line a child wrote to stderr, marked as such, escapes and control characters
    left out; `prefix` goes before the mark (a child's `[1] `)."""
    text = Text(prefix)
    text.append((STDERR_MARK if terminal else STDERR_PIPE_MARK) + printable(line), style="red")
    return text


def last_line(text: str | None) -> str:
    """The last line that says something, on one line: what a column shows of a text."""
    for line in reversed(printable(text or "").splitlines()):
        if line.strip():
            return " ".join(line.split())
    return ""


def workspace_summary(workspace: Workspace) -> str:
    """`1 commit, 0 uncommitted, 1 file +1 -0`: what an isolated child left in its worktree."""
    stat = workspace.diff_stat
    return (
        f"{plural(workspace.commits, 'commit')}, {workspace.uncommitted} uncommitted, "
        f"{plural(stat.files, 'file')} +{stat.insertions} -{stat.deletions}"
    )
