"""The run state machine: one place where a run, a child or a workflow step changes status.

`RunStateMachine`'s `start`, `start_child`, `transition`, `transition_child` and
`transition_step` are the only code that assigns a status. They check `NEXT`
(`STEP_NEXT` for steps), stamp the time, write the INFO log line of a run's or a
child's start and end (`lifecycle_log.py`), and append a `run/event` with the run's next
`seq` (a step's status shows in snapshots only: it has no event of its own). A
run or a child ends with one ending (endings.py), whose type carries exactly the
facts the protocol requires of its status (protocol.md §12). A
transition out of a terminal status is refused (returns False), so every race
— exit, stop, timeout, stall, disconnect, a dead server's recovery — resolves
as first-wins and a terminal status is never changed. Only a resume leaves one
(`reopen`, `reopen_step`), for a new attempt that ends once more.
"""

from __future__ import annotations

import collections
import json.encoder
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

import attrs

from subagent_host.backends.exits import StoppedBy
from subagent_host.runs import lifecycle_log
from subagent_host.values import BACKGROUND_MODE, RunKind

# Statuses are what clients see too, so they live in values; re-exported for the machine's readers.
from subagent_host.values import TERMINAL as TERMINAL
from subagent_host.values import RunStatus as RunStatus
from subagent_host.values.choices import (
    AdmittedBy,
    ReachedLimit,
    SessionDigestSource,
    StepStatus,
)
from subagent_host.values.facts import (
    Diagnostic,
    ErrorInfo,
    OutputInfo,
    Resources,
    Usage,
    Workspace,
)
from subagent_host.values.interaction import PendingPermission, TurnInfo
from subagent_host.values.steps import StepState as StepState

if TYPE_CHECKING:
    # Imported where the machine makes events and takes endings: what reads runs back
    # (`subagent-host runs`, `show`: store/browse.py) needs neither (tests/terminal).
    from subagent_host.runs.endings import ChildEnding, RunEnding
    from subagent_host.values.events import Event

NEXT: Final[Mapping[RunStatus, frozenset[RunStatus]]] = {
    # A queued child may end without running: stopped, or its chain ended first.
    RunStatus.QUEUED: frozenset({RunStatus.RUNNING}) | TERMINAL,
    RunStatus.RUNNING: TERMINAL,
    **{status: frozenset() for status in TERMINAL},
}


# Events kept per run for replay (`status {since}`), in memory while the run goes
# on and on disk: a streaming run emits one per output chunk (up to 256 KiB), so
# they are bounded by count and by the bytes they take in a reply (`event_bytes`),
# oldest dropped first; `seq` keeps counting.
MAX_EVENTS_KEPT: Final = 10_000
MAX_EVENT_BYTES_KEPT: Final = 8 * 1024 * 1024
# What an event weighs besides its text: type, time, index and status as stored and sent.
EVENT_OVERHEAD_BYTES: Final = 128


@attrs.frozen
class RunEvent:
    """One `run/event`: `seq` rises by one per run from 1; `payload` is what happened."""

    seq: int
    at: datetime
    payload: Event

    @property
    def type(self) -> str:
        """The event's `type` tag, its payload's."""
        return self.payload.type


def event_bytes(event: RunEvent) -> int:
    """What one event counts against MAX_EVENT_BYTES_KEPT: its text (an `output`, `activity` or
    `message` event's, a terminal `status` event's output) or a `tool` event's summary as JSON
    writes it on the wire, plus the rest."""
    from subagent_host.values.events import text_of  # loaded with the machine's events

    text = text_of(event.payload)
    if text is None:
        return EVENT_OVERHEAD_BYTES
    return EVENT_OVERHEAD_BYTES + json_text_bytes(text)


def json_text_bytes(text: str) -> int:
    """The bytes `text` takes in a reply, quotes left out: what the server's encoder writes
    (rpc/json_codec.py: UTF-8, escapes only where JSON needs them).

    Not its length: a NUL is six bytes on the wire (`\\u0000`), a quote or a newline
    two, `é` two; a budget of text would let a reply grow six times past its figure.
    A lone surrogate, which UTF-8 cannot carry, turns the whole reply into `\\u` escapes.
    """
    escaped = json.encoder.encode_basestring(text)  # the encoder's own escaping (C)
    if escaped.isascii():
        return len(escaped) - 2
    try:
        return len(escaped.encode("utf-8")) - 2
    except UnicodeEncodeError:
        return len(json.encoder.encode_basestring_ascii(text)) - 2


class EventLog:
    """A run's newest events in memory: at most MAX_EVENTS_KEPT of them and
    MAX_EVENT_BYTES_KEPT bytes (`event_bytes`), the oldest dropped first.

    The newest event is always kept, however large. `release()` empties it
    once the run has ended: its events are then read from the store.
    """

    def __init__(self, events: Iterable[RunEvent] = ()) -> None:
        self._events: collections.deque[RunEvent] = collections.deque()
        self._sizes: collections.deque[int] = collections.deque()
        self.bytes = 0
        for event in events:
            self.append(event)

    def append(self, event: RunEvent) -> int:
        """Keep `event`; return the seq of the newest event this dropped (0 if none)."""
        size = event_bytes(event)
        self._events.append(event)
        self._sizes.append(size)
        self.bytes += size
        dropped = 0
        while len(self._events) > 1 and (
            len(self._events) > MAX_EVENTS_KEPT or self.bytes > MAX_EVENT_BYTES_KEPT
        ):
            dropped = self._events.popleft().seq
            self.bytes -= self._sizes.popleft()
        return dropped

    def release(self) -> None:
        """Forget the events held (they are on disk, or on their way there)."""
        self._events.clear()
        self._sizes.clear()
        self.bytes = 0

    def __iter__(self) -> Iterator[RunEvent]:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def __getitem__(self, index: int) -> RunEvent:
        return self._events[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EventLog):
            return NotImplemented
        return list(self._events) == list(other._events)

    __hash__ = None  # type: ignore[assignment]  # mutable


@attrs.define
class ChildRun:
    index: int
    backend: str
    label: str | None = None
    status: RunStatus = RunStatus.QUEUED
    attempt: int = 1
    pid: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    stopped_by: StoppedBy | None = None
    """How the process ended (`exit`, or the stop sequence's `sigterm` or `sigkill`);
    None for an attempt that never started, was interrupted, or was recorded before."""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    output: OutputInfo | None = None
    error: ErrorInfo | None = None
    reason: str | None = None
    resources: Resources | None = None
    usage: Usage | None = None
    backend_session_id: str | None = None
    session_digest: str | None = None
    """The SHA-256 of the CLI's session file as this attempt left it (pi's only:
    backends/sessions.py); None in records from before it was taken."""
    session_digest_source: SessionDigestSource | None = None
    """When it was taken: `attempt-end`, or `recovered` by the next server."""
    pgid: int | None = None
    node: str | None = None
    """The cluster node its process runs on (a cluster executor); None: this machine."""
    create_time: float | None = None
    """The process's start time as psutil reports it: with the pid and the run
    marker, how a later server recognises a process this child left."""
    start_time_probe: Callable[[], float | None] | None = attrs.field(
        default=None, eq=False, repr=False
    )
    """Reads `create_time` while the process is ours (not stored)."""
    step: int | None = None
    """A workflow child's step."""
    prompt_head: str | None = None
    """The first line of an agent child's prompt, cut to PROMPT_HEAD_CHARS: what the
    terminal's `runs` and `show` name it by (stored, never sent on the wire). None for
    a command child and in records from before it was kept."""
    workspace: Workspace | None = None
    """An isolated child's worktree as its last ended attempt left it (protocol.md §8.7);
    a resumed attempt runs in it again."""
    workspace_cwd: str | None = None
    """Where in that worktree it ran (stored, never sent on the wire)."""
    turn: TurnInfo | None = None
    """An interactive child's turns: begun so far, and running or waiting (None for
    any other child)."""
    enforced_timeout_ms: int | None = None
    """The timeout that ended a `timed-out` attempt (stored, never sent on the wire): the
    run's `enforcedTimeoutMs` whenever the run settles from this child, also after a
    resume of another child, on any server. None for any other attempt, and in records
    from before it was kept (store/reads.py fills it from the run's then)."""


PROMPT_HEAD_CHARS: Final = 80


def prompt_head(prompt: str | None) -> str | None:
    """The first non-blank line of `prompt`, at most PROMPT_HEAD_CHARS long (an agent
    child's prompt is otherwise only on its stdin: kept short, it names the run)."""
    for line in (prompt or "").splitlines():
        if line.strip():
            line = " ".join(line.split())
            if len(line) > PROMPT_HEAD_CHARS:
                return line[: PROMPT_HEAD_CHARS - 1] + "…"
            return line
    return None


# A step's state is what the wire shows of it, so it lives in values (values/steps.py);
# the statuses it starts with are named here for the machine's readers.
STEP_PENDING: Final = StepStatus.PENDING
STEP_RUNNING: Final = StepStatus.RUNNING
STEP_TERMINAL: Final = frozenset(StepStatus(status) for status in TERMINAL)
# A step is pending until it starts, then running until its children's outcome (or a
# fan-out that cannot start its children, or a dead server) ends it, once.
STEP_NEXT: Final[Mapping[StepStatus, frozenset[StepStatus]]] = {
    STEP_PENDING: frozenset({STEP_RUNNING}),
    STEP_RUNNING: STEP_TERMINAL,
    **{status: frozenset() for status in STEP_TERMINAL},
}


@attrs.define
class WorkflowState:
    name: str
    steps: list[StepState]


@attrs.define
class Run:
    run_id: str
    session_id: str
    kind: RunKind
    fingerprint: str
    created_at: datetime
    children: list[ChildRun]
    label: str | None = None
    status: RunStatus = RunStatus.QUEUED
    started_at: datetime | None = None
    ended_at: datetime | None = None
    output: OutputInfo | None = None
    error: ErrorInfo | None = None
    reason: str | None = None
    enforced_timeout_ms: int | None = None
    reached_limit: ReachedLimit | None = None
    workflow: WorkflowState | None = None
    mode: str | None = None
    """The mode its spawn answered in (`background` or `task`): what a resume of it
    uses unless told otherwise. None in records from before it was kept."""
    background: tuple[int, ...] = ()
    """The members of a mixed `tasks` run that run in the background: its spawn
    answered (`mode` `task`) once the others had ended. Empty for a run answered as one."""
    diagnostics: tuple[Diagnostic, ...] = ()
    """Warnings about the run, each once, in the order they arose (kept in its record)."""
    admitted_by: AdmittedBy = AdmittedBy.DIRECT
    """How its spawn was admitted: `preflight` (a valid preflightId) or `direct`. A
    record without it (a direct run, or one recorded before it existed) reads as direct."""
    egress_consent: bool = False
    """Whether its spawn gave `egressConsent: true` (its children may send their work to their
    model providers); a resume of it under `--require-egress-consent` needs it."""
    earlier_usage: Usage | None = None
    """The usage of its children's earlier attempts (those a resume replaced), summed:
    `children` holds each child's newest attempt only. Not in the run's record: read
    back from the stored attempts (store/reads.py), which keep every one."""
    last_seq: int = 0
    """The seq of the newest event (kept when old events are dropped or not loaded)."""
    first_retained_seq: int = 1
    """The oldest seq still retained (in memory and on disk): earlier ones were dropped."""
    events: EventLog = attrs.Factory(EventLog)
    """The newest events while the run goes on, for `status {since}`; empty once
    it has ended and they are read from the store (seq never restarts)."""
    pending_permissions: dict[str, PendingPermission] = attrs.Factory(dict)
    """The permissions its interactive children wait on, by id, oldest first (not in
    its record: they live only as long as the children that asked)."""

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    def member_mode(self, index: int) -> str | None:
        """The mode of one member: `background` for a background member of a mixed run,
        else the run's."""
        return BACKGROUND_MODE if index in self.background else self.mode

    @property
    def waited_for(self) -> list[ChildRun]:
        """The members a `task`-mode answer of a mixed run waits for (the others run on)."""
        return [child for child in self.children if child.index not in self.background]

    @property
    def usage(self) -> Usage | None:
        """Every attempt of every child, summed (protocol.md §12): what the run cost."""
        return Usage.total([self.earlier_usage, *(child.usage for child in self.children)])

    def replace_child(self, child: ChildRun) -> None:
        """A resume's new attempt takes the child's place; the attempt it replaces
        still counts in the run's usage."""
        old = self.children[child.index]
        self.earlier_usage = Usage.total([self.earlier_usage, old.usage])
        self.children[child.index] = child


Clock = Callable[[], datetime]
EventListener = Callable[[Run, RunEvent], None]


def utc_now() -> datetime:
    return datetime.now(UTC)


class RunStateMachine:
    """Applies status changes and appends events; notifies one listener per event."""

    def __init__(self, clock: Clock = utc_now, listener: EventListener | None = None) -> None:
        self._clock = clock
        self._listener = listener

    def now(self) -> datetime:
        return self._clock()

    def start(self, run: Run) -> bool:
        """A queued run is running: its first child started. False if it is not queued."""
        from subagent_host.values.events import StatusEvent  # see TYPE_CHECKING above

        if not self._move(run, RunStatus.RUNNING):
            return False
        self.emit(run, StatusEvent(status=RunStatus.RUNNING))
        return True

    def transition(self, run: Run, ending: RunEnding) -> bool:
        """End the run with `ending`; False (and no change) if it has ended already."""
        from subagent_host.values.events import StatusEvent  # see TYPE_CHECKING above

        to = ending.status
        if not self._move(run, to):
            return False
        _record_run_ending(run, ending)
        if run.output is not None:
            # The run's final output as its snapshot shows it: a background run's client
            # has its answer without asking `status` again (protocol.md §11).
            self.emit(run, StatusEvent(status=to, output=run.output))
        else:
            self.emit(run, StatusEvent(status=to))
        lifecycle_log.run_ended(run)
        return True

    def start_child(
        self,
        run: Run,
        child: ChildRun,
        *,
        pid: int | None = None,
        pgid: int | None = None,
        node: str | None = None,
        start_time_probe: Callable[[], float | None] | None = None,
    ) -> bool:
        """A queued child's process started (as far as known: `pid`, its group, the node it
        runs on); False if the child is not queued."""
        from subagent_host.values.events import ChildEvent  # see TYPE_CHECKING above

        if not self._move(child, RunStatus.RUNNING):
            return False
        child.pid, child.pgid, child.node = pid, pgid, node
        child.start_time_probe = start_time_probe
        if run.status is RunStatus.QUEUED:
            # A run is queued until its first child starts (protocol.md §8.4): a run waiting
            # behind the server-wide limit says so.
            self.start(run)
        lifecycle_log.child_started(run, child)
        self.emit(run, ChildEvent(index=child.index, status=RunStatus.RUNNING))
        return True

    def transition_child(self, run: Run, child: ChildRun, ending: ChildEnding) -> bool:
        """End one child with `ending`; False (and no change) if it has ended already."""
        from subagent_host.values.events import ChildEvent  # see TYPE_CHECKING above

        to = ending.status
        if not self._move(child, to):
            return False
        _record_child_ending(child, ending)
        lifecycle_log.child_ended(run, child)
        self.emit(run, ChildEvent(index=child.index, status=to))
        return True

    def _move(self, target: Run | ChildRun, to: RunStatus) -> bool:
        """Set `target`'s status to `to` if NEXT allows it, and stamp the time."""
        if to not in NEXT[target.status]:
            return False
        now = self._clock()
        target.status = to
        if to is RunStatus.RUNNING and target.started_at is None:
            target.started_at = now
        if to in TERMINAL:
            target.ended_at = now
        return True

    def transition_step(self, run: Run, step: StepState, to: StepStatus) -> bool:
        """Move a workflow step of `run` to `to`; False (and no change) if not allowed.

        No event: a step's status is seen in the run's snapshots (§17), as before.
        """
        assert run.workflow is not None and run.workflow.steps[step.index] is step
        if to not in STEP_NEXT[step.status]:
            return False
        step.status = to
        return True

    def reopen_step(self, run: Run, step: StepState, to: StepStatus) -> None:
        """A resume: a step that ended runs again — the resumed child's step (`running`),
        or a later one that started no child (a failed fan-out) made `pending` again.

        The only way out of a terminal step status; the step then ends once more.
        """
        assert run.workflow is not None and run.workflow.steps[step.index] is step
        if step.status not in STEP_TERMINAL or to not in (STEP_RUNNING, STEP_PENDING):
            raise ValueError(f"a {step.status} step cannot be reopened as {to}")
        step.status = to

    def created(self, run: Run) -> None:
        """A new run, queued until its first child starts: its first event (seq 1)."""
        from subagent_host.values.events import StatusEvent  # see TYPE_CHECKING above

        lifecycle_log.run_started(run)
        self.emit(run, StatusEvent(status=run.status))

    def reopen(self, run: Run) -> None:
        """A resume: the terminal run is queued again (a new attempt of one of its children).

        The only way out of a terminal status. The attempt that ended keeps its
        own terminal status in the store; the run's outcome is cleared and will
        be set again, exactly once, when the new attempt has ended. The run is
        `running` again once the new attempt starts.
        """
        from subagent_host.values.events import StatusEvent  # see TYPE_CHECKING above

        if run.status not in TERMINAL:
            raise ValueError("only a terminal run can be reopened")
        run.status = RunStatus.QUEUED
        run.ended_at = None
        _record_run_ending(run, None)
        self.emit(run, StatusEvent(status=RunStatus.QUEUED))

    def emit(self, run: Run, payload: Event) -> RunEvent:
        """Append an event with the run's next seq and hand it to the listener."""
        run.last_seq += 1
        event = RunEvent(seq=run.last_seq, at=self._clock(), payload=payload)
        _keep(run, event)
        if self._listener is not None:
            self._listener(run, event)
        return event


def restore_events(run: Run, events: Iterable[RunEvent]) -> None:
    """Hold a run's retained events again, read back from disk when it is resumed:
    the bounds then count them with the new attempt's events."""
    for event in events:
        _keep(run, event)


def _keep(run: Run, event: RunEvent) -> None:
    dropped = run.events.append(event)
    if dropped:
        run.first_retained_seq = max(run.first_retained_seq, dropped + 1)


def _record_run_ending(run: Run, ending: RunEnding | None) -> None:
    """Write `ending`'s facts onto the run, each other fact of an ending cleared (None: all)."""
    from subagent_host.runs.endings import (  # see TYPE_CHECKING above
        Cancelled,
        Failed,
        Interrupted,
        LimitReached,
        TimedOut,
    )

    run.output = ending.output if ending is not None else None
    run.error = ending.error if isinstance(ending, Failed) else None
    run.reason = ending.reason if isinstance(ending, Cancelled | TimedOut | Interrupted) else None
    run.enforced_timeout_ms = ending.enforced_timeout_ms if isinstance(ending, TimedOut) else None
    run.reached_limit = ending.reached_limit if isinstance(ending, LimitReached) else None


def _record_child_ending(child: ChildRun, ending: ChildEnding) -> None:
    """Write `ending`'s facts onto the child: its output, its error or its reason, and how
    its process ended when that is known (else the child keeps what it has)."""
    from subagent_host.runs.endings import (  # see TYPE_CHECKING above
        ChildCompleted,
        ChildFailed,
        ChildTimedOut,
    )

    child.output = ending.output
    if isinstance(ending, ChildFailed):
        child.error = ending.error
    elif not isinstance(ending, ChildCompleted):
        child.reason = ending.reason
    if isinstance(ending, ChildTimedOut):
        child.enforced_timeout_ms = ending.enforced_timeout_ms
    if ending.exit is not None:
        child.exit_code, child.signal = ending.exit.exit_code, ending.exit.signal
        child.stopped_by = ending.exit.stopped_by
        child.usage = ending.exit.usage
        child.backend_session_id = ending.exit.backend_session_id
