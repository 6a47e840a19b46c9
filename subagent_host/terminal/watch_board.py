"""What `watch` shows, read from a state directory: its runs, each child's latest activity,
what it runs, the permissions interactive children wait on, and the CPU and memory of
the children still running.

Everything here is synchronous and runs on `watch`'s one reader thread: the database
through `StateBrowser` (read-only), the running children's processes through psutil.
A read happens only when the database changed (`data_version`), and then only the runs
whose events moved are asked for their activity again (`BoardCache`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from subagent_host.backends.liveness import tree_usage
from subagent_host.backends.reports import stderr_reason
from subagent_host.runs.state import ChildRun, Run, RunStatus
from subagent_host.store.browse import LaunchSummary, StateBrowser
from subagent_host.terminal.interaction import pending_permissions
from subagent_host.terminal.views import child_head, last_line, plural, printable
from subagent_host.values import RunKind
from subagent_host.values.events import PermissionEvent
from subagent_host.values.facts import ErrorInfo
from subagent_host.values.interaction import PendingPermission

RUNS_SHOWN: Final = 100
"""The newest runs read: more than a screen holds, fewer than a slow read would need."""
TAIL_LINES: Final = 500
"""Lines of output kept for the output view (it shows the last that fit)."""


@attrs.frozen
class ChildLine:
    """One child as `watch` shows it."""

    child: ChildRun
    what: str
    """Its label, else its command line or its backend and model."""
    activity: str
    """What it does or did, on one line."""
    cpu_seconds: float | None
    rss_bytes: int | None
    """Resident memory now while it runs (sampled by `watch`), its peak once it ended."""


@attrs.frozen
class RunLine:
    """One run as `watch` shows it, with its children."""

    run: Run
    what: str
    children: tuple[ChildLine, ...]
    pending: tuple[PendingPermission, ...] = ()
    """The permissions its interactive children wait on, oldest first (while it runs)."""

    @property
    def cpu_seconds(self) -> float | None:
        known = [c.cpu_seconds for c in self.children if c.cpu_seconds is not None]
        return sum(known) if known else None

    @property
    def rss_bytes(self) -> int | None:
        known = [c.rss_bytes for c in self.children if c.rss_bytes is not None]
        return sum(known) if known else None


@attrs.frozen
class OutputTail:
    """The output view of one run: each child's output, or what it streamed so far."""

    run: Run
    texts: tuple[tuple[ChildRun, str], ...]


@attrs.define
class BoardCache:
    """What a read keeps for the next: launches never change, activity only with events."""

    launches: dict[str, dict[int, LaunchSummary]] = attrs.Factory(dict)
    activity: dict[str, tuple[int, dict[int, str], tuple[PendingPermission, ...]]] = attrs.Factory(
        dict
    )
    """Per run: the `last_seq` it was read at, each child's latest activity, and the
    permissions its children wait on."""


def read_board(
    browser: StateBrowser, session_id: str | None, cache: BoardCache
) -> tuple[RunLine, ...]:
    """The newest runs (of one session, or of all), each with its children."""
    lines = []
    for browsed in browser.runs(session_id, limit=RUNS_SHOWN):
        run = browsed.run
        if not cache.launches.get(run.run_id):
            cache.launches[run.run_id] = browser.launches(run.run_id)
        seen = cache.activity.get(run.run_id)
        if seen is None or seen[0] != run.last_seq:
            seen = (run.last_seq, browser.latest_activity(run.run_id), waiting(browser, run))
            cache.activity[run.run_id] = seen
        line = run_line(run, cache.launches[run.run_id], seen[1])
        lines.append(attrs.evolve(line, pending=seen[2]))
    shown = {line.run.run_id for line in lines}
    for forgotten in cache.launches.keys() - shown:  # pruned, or scrolled out of the newest
        cache.launches.pop(forgotten, None)
        cache.activity.pop(forgotten, None)
    return tuple(lines)


def waiting(browser: StateBrowser, run: Run) -> tuple[PendingPermission, ...]:
    """The permissions a running run's interactive children wait on, from its events."""
    if run.is_terminal or all(child.turn is None for child in run.children):
        return ()
    asked = browser.events_of(run.run_id, ("permission",))
    return pending_permissions(e.payload for e in asked if isinstance(e.payload, PermissionEvent))


def run_line(
    run: Run, launches: Mapping[int, LaunchSummary], activity: Mapping[int, str]
) -> RunLine:
    children = tuple(
        ChildLine(
            child=child,
            what=child.label or child_head(child, launches.get(child.index)),
            activity=child_activity(child, activity.get(child.index)),
            cpu_seconds=child.resources.cpu_seconds if child.resources else None,
            rss_bytes=child.resources.peak_rss_bytes if child.resources else None,
        )
        for child in run.children
    )
    return RunLine(run, run_what(run, children), children)


def run_what(run: Run, children: tuple[ChildLine, ...]) -> str:
    if run.label:
        return run.label
    if run.workflow is not None:
        return f"workflow {run.workflow.name}"
    if len(children) == 1:
        return children[0].what
    if run.kind is RunKind.CHAIN:
        return f"chain of {plural(len(children), 'step')}"
    return plural(len(children), "task")


def child_activity(child: ChildRun, latest: str | None) -> str:
    """What a running child does (its latest activity or output line); how an ended one
    ended: its error, its reason, else its last line of output."""
    if child.status is RunStatus.FAILED and child.error is not None:
        return failure(child.backend, child.error)
    if child.reason and child.status is not RunStatus.COMPLETED:
        return child.reason
    if child.status is RunStatus.COMPLETED and child.output is not None:
        return last_line(child.output.text) or last_line(latest)
    return last_line(latest)


def failure(backend: str, error: ErrorInfo) -> str:
    """The error, and the line of stderr that says why, chosen by the backend's rule as
    the error message's own is (`stderr_reason`: pi's first line, not its docs' paths),
    when the message does not say it already."""
    message = last_line(error.message)
    stderr = (error.data or {}).get("stderrTail")
    said = stderr_reason(backend, stderr) if isinstance(stderr, str) else None
    return f"{message}: {said}" if said and said not in message else message


def sample_running(lines: tuple[RunLine, ...]) -> tuple[RunLine, ...]:
    """The board with each running child's CPU and resident memory read now from its
    process tree (the server records them only as it writes the run)."""
    sampled = []
    for line in lines:
        children = tuple(sample_child(child) for child in line.children)
        sampled.append(attrs.evolve(line, children=children))
    return tuple(sampled)


def sample_child(line: ChildLine) -> ChildLine:
    child = line.child
    if child.status is not RunStatus.RUNNING or child.pid is None or child.create_time is None:
        return line
    usage = tree_usage(child.pid, child.create_time)
    if usage is None:
        return line
    cpu, rss = usage
    recorded = line.cpu_seconds or 0.0
    return attrs.evolve(line, cpu_seconds=max(cpu, recorded), rss_bytes=rss)


def read_tail(browser: StateBrowser, run_id: str) -> OutputTail | None:
    """The run's output view (None once the run is gone): each child's recorded output,
    or while it runs, what it streamed so far."""
    run = browser.load(run_id)
    if run is None:
        return None
    texts = []
    for child in run.children:
        text = child.output.text if child.output is not None else None
        if text is None:
            text = browser.streamed_output(run_id, child.index)
        lines = printable(text).expandtabs().splitlines()
        if child.error is not None:
            lines += failure_lines(child.error)
        texts.append((child, "\n".join(lines[-TAIL_LINES:])))
    return OutputTail(run, tuple(texts))


def failure_lines(error: ErrorInfo) -> list[str]:
    """Why a child failed, after its output: the error, and the end of its stderr."""
    stderr = (error.data or {}).get("stderrTail")
    tail = printable(stderr).expandtabs().splitlines() if isinstance(stderr, str) else []
    return [f"error: {last_line(error.message)}", *(f"stderr: {line}" for line in tail[-10:])]
