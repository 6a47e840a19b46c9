"""What `status` and `stop` answer: a run's snapshot with its children and steps, or the
list of a session's runs, and `status`'s params."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Generic, TypeVar

import attrs

from subagent_host.rpc.wire.basics import INLINE
from subagent_host.rpc.wire.events import EventWire
from subagent_host.values import RunKind, RunStatus
from subagent_host.values.choices import (
    AdmittedBy,
    BackendName,
    ReachedLimit,
    StoppedBy,
)
from subagent_host.values.facts import (
    Diagnostic,
    ErrorInfo,
    OutputInfo,
    Resources,
    RunSummary,
    Usage,
    Workspace,
)
from subagent_host.values.interaction import PendingPermission, TurnInfo
from subagent_host.values.steps import StepState

T = TypeVar("T")


@attrs.frozen
class RunOutcome:
    """How a run or a child went, in the fields both snapshots carry (written inline:
    their keys stand in the snapshot itself). Each is absent until it is known."""

    started_at: datetime | None = None
    """When it started (a resumed run keeps its first start; each attempt of a child has its own);
    absent for one that never started."""
    ended_at: datetime | None = None
    """When it ended; absent while it goes on."""
    duration_ms: int | None = None
    """`endedAt - startedAt` in milliseconds; present only once both are."""
    output: OutputInfo | None = None
    """The final text, possibly cut to the output caps; a parallel run's is a summary of its
    children's."""
    error: ErrorInfo | None = None
    """A `failed` status's error: `{code, message, data?}`."""
    reason: str | None = None
    """Why it ended when it did not complete: a stop's reason (`cancelled`), `timeout` or `stall`
    (`timed-out`), the limit's name (a child's `limit-reached`), or why it was `interrupted`."""


class OutcomeField(Generic[T]):
    """One field of a snapshot's `outcome`, read as the snapshot's own."""

    def __init__(self, read: Callable[[RunOutcome], T]) -> None:
        self._read = read

    def __get__(self, snapshot: OutcomeFields, owner: type | None = None) -> T:
        return self._read(snapshot.outcome)


class OutcomeFields:
    """The `outcome`'s fields, read as the snapshot's own, as the wire writes them
    (`child.output.text` is `child.outcome.output.text`)."""

    outcome: RunOutcome

    started_at = OutcomeField(lambda outcome: outcome.started_at)
    ended_at = OutcomeField(lambda outcome: outcome.ended_at)
    duration_ms = OutcomeField(lambda outcome: outcome.duration_ms)
    output = OutcomeField(lambda outcome: outcome.output)
    error = OutcomeField(lambda outcome: outcome.error)
    reason = OutcomeField(lambda outcome: outcome.reason)


@attrs.frozen
class ChildSnapshot(OutcomeFields):
    index: int
    """The child's index in the run, from 0."""
    backend: BackendName
    """`command`, `pi`, `claude`, `codex` or a configured ACP agent's name (protocol.md §24.1)."""
    status: RunStatus
    """Its newest attempt's: `queued`, `running`, or a terminal status (protocol.md §12)."""
    attempt: int
    """1, then one more for each resume."""
    label: str | None = None
    """Its item's label, when it has one."""
    pid: int | None = None
    """Its process id; absent until its process is started."""
    node: str | None = None
    """The id of the cluster node its process runs on (`--executor ray`, protocol.md §8.8;
    `pid` is that node's); absent for a child of this machine."""
    exit_code: int | None = None
    """The exit status of its process, when it exited with one."""
    signal: str | None = None
    """The name of the signal that killed its process, e.g. `SIGTERM`."""
    stopped_by: StoppedBy | None = None
    """`exit`, `sigterm` or `sigkill`: how its process ended (protocol.md §10, §12)."""
    outcome: RunOutcome = attrs.field(factory=RunOutcome, metadata={INLINE: True})
    """Written inline, not under `outcome`: its keys (`startedAt`, `endedAt`, `durationMs`,
    `output`, `error`, `reason`) stand in the snapshot itself, each absent until known."""
    usage: Usage | None = None
    """Tokens and cost, from agent backends."""
    backend_session_id: str | None = None
    """The agent CLI's own session id (the one a resume continues)."""
    resources: Resources | None = None
    """CPU time, peak memory and process count of its whole process tree (protocol.md §12)."""
    step: int | None = None
    """A workflow child's step."""
    workspace: Workspace | None = None
    """An isolated child's git worktree (protocol.md §8.7): made when it starts, measured
    when it ends (commits, changed files, uncommitted changes, kept or removed)."""
    turn: TurnInfo | None = None
    """An interactive child's turns (protocol.md §23): how many began, and whether one
    runs or it waits for input; absent for any other child."""


@attrs.frozen
class BackgroundMember:
    """A member of a mixed `tasks` run that runs in the background (protocol.md §8.5)."""

    index: int
    """The child's index, as `children` names it."""
    status: str
    """Its status when the snapshot was taken (`queued`, `running`, or how it ended)."""


# A step's snapshot is its state (values/steps.py), frozen: its fields, their order and
# their descriptions are the state's, declared once there. The wire may not import
# `runs/`, nor `runs/` the wire, so the state lives below both; this class adds only
# its name and its description on the wire.
@attrs.frozen
class StepSnapshot(StepState):
    """One workflow step: `pending` until it starts, then its children's outcome."""


@attrs.frozen
class WorkflowSnapshot:
    name: str
    """The workflow's `name`."""
    steps: tuple[StepSnapshot, ...]
    """Every step of its chain, in order."""


@attrs.frozen
class RunSnapshot(OutcomeFields):
    run_id: str
    """The run's id."""
    session_id: str
    """The session that started it."""
    kind: RunKind
    """`single`, `parallel`, `chain` or `workflow`."""
    status: RunStatus
    """`queued`, `running`, then one terminal status that never changes unless a resume reopens the
    run (protocol.md §12)."""
    created_at: datetime
    """When the run was created."""
    fingerprint: str
    """`sha256:v1:` and 64 hex digits: the SHA-256 of its plan's canonical JSON (environment values
    left out)."""
    last_seq: int
    """The seq of its newest event."""
    children: tuple[ChildSnapshot, ...]
    """Its children by index (a workflow's are added step by step)."""
    admitted_by: AdmittedBy
    """`preflight` or `direct`: how the spawn was admitted (always sent)."""
    egress_consent: bool | None = None
    """True when the spawn gave `egressConsent: true` (kept with the run, and what its resumes
    carry); absent otherwise."""
    label: str | None = None
    """The call's label, when it has one."""
    outcome: RunOutcome = attrs.field(factory=RunOutcome, metadata={INLINE: True})
    """Written inline, not under `outcome`: its keys (`startedAt`, `endedAt`, `durationMs`,
    `output`, `error`, `reason`) stand in the snapshot itself, each absent until known."""
    enforced_timeout_ms: int | None = None
    """A `timed-out` run's: the limit that ended a child, in milliseconds (its `timeoutMs`, or its
    `stallTimeoutMs` for a stall)."""
    reached_limit: ReachedLimit | None = None
    """A `limit-reached` run's: which limit, `max-turns`, `max-tokens` or `max-cost`."""
    usage: Usage | None = None
    """Every attempt of every child that reported usage, summed: tokens added up, `costUsd` only
    when each of them has a cost; absent when none reported usage (protocol.md §12)."""
    workflow: WorkflowSnapshot | None = None
    """A workflow run's name and steps."""
    diagnostics: tuple[Diagnostic, ...] | None = None
    """Warnings about the run (e.g. a skipped `snapshotPath` write); absent when none."""
    background: tuple[BackgroundMember, ...] | None = None
    """A mixed `tasks` run's members that run in the background, with their status: its
    `task`-mode answer came once the others had ended, and these go on (their events follow
    as `run/event`s); absent for a run whose members all run in one mode."""
    pending_permissions: tuple[PendingPermission, ...] | None = None
    """The tool uses its interactive children wait to have answered (`run/permit`,
    protocol.md §23.4), oldest first; absent when none."""
    already_terminal: bool | None = None
    """`stop` and `run/close`: true when the run had ended before the request arrived."""
    events: tuple[EventWire, ...] | None = None
    """`status {since}` only: every retained event after `since`."""
    first_retained_seq: int | None = None
    """`status {since}` only, when events after `since` were dropped: the oldest seq held."""


@attrs.frozen
class RunList:
    runs: tuple[RunSummary, ...]
    """This session's runs, newest first, those of earlier server processes on the same state
    directory included."""


StatusResult = RunSnapshot | RunList
"""`status` answers a snapshot when given a `runId`, else the list (told apart by `runs`)."""


@attrs.frozen
class StatusParams:
    run_id: str | None = None
    """The run: its id, or a unique prefix of at least 8 characters; absent: list this session's
    runs."""
    since: int | None = None
    """Also send every retained event whose `seq` is greater than this."""
