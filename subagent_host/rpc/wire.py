"""Every type that crosses the wire, and the one cattrs converter that reads and writes them.

Fields are snake_case in Python and camelCase on the wire. A field whose value is
`None` is omitted from what we send; a field that must always be sent has no
default. Moments are `datetime`s, written as `timestamp` spells them. What runs
report (usage, output, error, resources, diagnostics, summaries) is not copied
into twins here: those types (`values/facts.py`) are sent as they are. Unknown
keys in params are rejected, but for `_meta` (`META`), which every method's params
may carry; primitives are checked, not coerced: cattrs on its own would turn
`"false"` into `True` and `3.7` into `3`.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, Generic, NewType, TypeVar, get_args

import attrs
import cattrs
from cattrs.errors import IterableValidationError, IterableValidationNote
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from subagent_host.planning.request import (
    RAW_STREAM,
    AccessRequest,
    ForEachStep,
    ItemFields,
    LaunchRequest,
    ParallelStep,
    Placement,
    SpawnItem,
    StreamChoice,
    WorkflowRequest,
    WorkflowStep,
)
from subagent_host.planning.views import (
    VIEWS,
    Contract,
    NormalizedPlan,
    Receipts,
    Unprobed,
    to_json,
)
from subagent_host.values import SESSION_ID_PATTERN, SESSION_ID_RULE, RunStatus, camel_case
from subagent_host.values.events import (
    EVENT_CLASSES,
    EVENT_ENUMS,
    Event,
    EventField,
    Phase,
    ToolKind,
)
from subagent_host.values.facts import (
    BackendInfo,
    Diagnostic,
    ErrorInfo,
    OutputInfo,
    Resources,
    RunSummary,
    Usage,
    Workspace,
)

# The launch request's types are planning's (they import nothing of ours): listed
# here so that every type on the wire can still be found through this module.
__all__ = [
    "camel_case",
    "AccessRequest",
    "ForEachStep",
    "ItemFields",
    "LaunchRequest",
    "ParallelStep",
    "Placement",
    "SpawnItem",
    "WorkflowRequest",
    "WorkflowStep",
]

T = TypeVar("T")


class WireValueError(ValueError):
    """A value has the wrong type or form; its message is shown to the client as is."""


# A run's few moments are written again for every snapshot of it.
@functools.lru_cache(maxsize=1024)
def timestamp(moment: datetime) -> str:
    """ISO 8601 UTC with milliseconds: `2026-11-30T02:40:00.123Z` (moments are UTC)."""
    # isoformat, not strftime: the C library's strftime re-reads the time zone each
    # call. Its first 23 characters are `YYYY-MM-DDTHH:MM:SS.mmm`.
    return moment.isoformat(timespec="milliseconds")[:23] + "Z"


# Formats are checked by structure hooks of these types, not by attrs validators:
# cattrs reports hook failures for every field at once, validators only after.
SessionId = NewType("SessionId", str)


def _structure_session_id(value: Any, _type: type) -> SessionId:
    text = _strict(str, "a string")(value, str)
    if SESSION_ID_PATTERN.fullmatch(text) is None:
        raise WireValueError(f"invalid session id: use {SESSION_ID_RULE}")
    return SessionId(text)


# --- what every method's params may carry ------------------------------------------------

META: Final = "_meta"
"""The key every method's params object may carry besides its own fields (as MCP and ACP
do): a JSON object, ignored. Not a field of any params type: `without_meta` takes it out
before the params are structured, and a schema adds it to every params object
(`META_SCHEMA`)."""

META_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "description": "Anything the client wants to carry with the request; the server ignores it.",
}
"""The JSON Schema of `_meta` in every method's params."""


def without_meta(params: dict[str, Any]) -> dict[str, Any]:
    """The params without `_meta`; raises WireValueError when `_meta` is not an object.

    Called by dispatch on every params object before it is structured: the one place
    `_meta` is read.
    """
    if META not in params:
        return params
    meta = params[META]
    if not isinstance(meta, dict):
        raise WireValueError(f"expected an object, got {json_type_name(meta)}")
    return {key: value for key, value in params.items() if key != META}


# --- ping and initialize -----------------------------------------------------------------


@attrs.frozen
class PingParams:
    session_id: SessionId | None = None
    """Bind this connection to an existing session; without it the connection keeps its own."""


@attrs.frozen
class ServerInfo:
    name: str
    """Always `subagent-host`."""
    version: str
    """The server's own version (e.g. `0.1.0`)."""


@attrs.frozen
class Limits:
    max_concurrency: int
    """Children of this server running at once; more wait `queued` (`--max-concurrency`, default
    4)."""
    max_parallel: int
    """The most items a `tasks` spawn may hold (default 8)."""
    grace_ms: int
    """Milliseconds a stopped tree gets between SIGTERM and SIGKILL (`--grace-ms`, default 5000)."""
    default_timeout_ms: int
    """A child's `timeoutMs` when the request gives none, in milliseconds."""
    default_stall_timeout_ms: int
    """A child's `stallTimeoutMs` when the request gives none: milliseconds without output before it
    is ended."""
    output_cap_bytes: int
    """Bytes of a child's output `text` kept; beyond them the text is cut (default 49152)."""
    output_cap_lines: int
    """Lines of a child's output `text` kept; beyond them the text is cut (default 600)."""
    previous_cap_bytes: int
    """Bytes of `{previous}` (and of a workflow's `{outputs.NAME}` and `{item}`) put into a prompt
    (default 65536)."""
    max_message_bytes: int
    """The largest message this server reads, in bytes (`--max-message-bytes`)."""
    max_queue: int
    """Children that may wait `queued` for a slot, server-wide; a spawn or resume that would queue
    more is refused -32005 (`--max-queue`, default 1000)."""
    workflow_parallelism: int
    """Children of one workflow step running at once (default 4)."""
    max_depth: int
    """The deepest a delegation chain may go: a server at this depth refuses every spawn (default
    1: a child's own server runs no children)."""


@attrs.frozen
class Admission:
    require_preflight: bool
    """True: a spawn runs only with a valid `preflightId`. No default: `false` is sent too."""
    require_egress_consent: bool
    """True: a launch with an agent child runs only with `egressConsent: true` (sent as
    `requirePreflight` is, `false` too)."""


@attrs.frozen
class PingResult:
    pong: bool
    """Always true."""
    server: ServerInfo
    """This server's name and version."""
    protocol_version: str
    """The protocol this server speaks: `"1"`."""
    session_id: str
    """The session this connection is bound to."""
    methods: tuple[str, ...]
    """The methods this server answers, sorted."""
    backends: tuple[BackendInfo, ...]
    """Each backend: whether it can run here, its probed version, or why not."""
    limits: Limits
    """The limits a client should plan with (durations in milliseconds, sizes in bytes)."""
    process_tracking: str
    """cgroup, subreaper or marker: what "nothing is left behind" rests on (protocol.md §8.7)."""
    persistence: str
    """sqlite, or memory when the state directory cannot be used (protocol.md §13)."""
    admission: Admission
    """The admission policy spawns are held to."""


@attrs.frozen
class ClientInfo:
    name: str
    """The client's name, for logs."""
    version: str | None = None
    """The client's version, when it gives one."""


TRACE_VALUES: Final = ("off", "messages", "verbose")
"""LSP's `TraceValue`s, which `initialize`'s `trace` may be."""


@attrs.frozen
class WorkspaceFolder:
    """An LSP workspace folder, as an editor sends it in `initialize`."""

    uri: str
    """The folder's URI (`file:///...`)."""
    name: str
    """The folder's name, as the editor shows it."""


@attrs.frozen
class InitializeParams:
    """What a client may say in `initialize`: this protocol's fields, and the rest of LSP
    3.17's `InitializeParams`, so that an LSP client's own handshake is taken as it is sent.
    Only `protocolVersion`, `clientInfo` and `processId` are read (logged); the others are
    checked and ignored."""

    protocol_version: str | None = None
    """The protocol version the client speaks; another one than the server's is not refused (the
    result says which the server speaks, and the client decides)."""
    client_info: ClientInfo | None = None
    """Who the client is: logged, never acted on."""
    capabilities: dict[str, Any] | None = None
    """What the client supports: an object, today ignored (no client capability is defined)."""
    process_id: int | None = None
    """LSP: the process id of the client that started the server; logged with `clientInfo`."""
    locale: str | None = None
    """LSP: the client's user-interface language (`en`, `de-CH`); ignored (messages are in
    English)."""
    root_path: str | None = None
    """LSP (deprecated there for `rootUri`): the workspace's root path; ignored (a child's
    directory is each spawn's `cwd`)."""
    root_uri: str | None = None
    """LSP (deprecated there for `workspaceFolders`): the workspace's root URI; ignored."""
    workspace_folders: tuple[WorkspaceFolder, ...] | None = None
    """LSP: the folders open in the editor; ignored."""
    initialization_options: Any = None
    """LSP: options for the server, any JSON value; ignored (the server is configured by its
    command line and configuration file)."""
    trace: str | None = None
    """LSP: `off`, `messages` or `verbose`; ignored (`$/setTrace` and `$/logTrace` are not
    used: the log is the server's stderr)."""
    work_done_token: MsgToken | None = None
    """LSP: a token to report the handshake's progress under; ignored (it waits for nothing)."""


@attrs.frozen
class NotificationCapabilities:
    """The notifications of this protocol, each way."""

    sent: tuple[str, ...]
    """What the server sends the client, sorted: `$/progress`, `run/event`."""
    accepted: tuple[str, ...]
    """What the server acts on when the client sends it, sorted: `$/cancelRequest`,
    `run/detach`, ... Any other notification is ignored."""


@attrs.frozen
class Features:
    """What this server does, as booleans and names (each one protocol.md describes)."""

    preflight: bool
    """`preflight` checks launches and issues `preflightId`s (always true)."""
    resume: bool
    """`preflight {resume}` and `resume` can continue a child: false with `enable_continue:
    false`, or with the history in memory."""
    workflows: bool
    """`spawn {workflow}` runs multi-step workflows (always true)."""
    agents: bool
    """`agents/list` and `spawn {agent}` use agent definitions (always true)."""
    work_done_progress: bool
    """`spawn {workDoneToken}` reports LSP `$/progress` (always true)."""
    batches: bool
    """JSON-RPC batches are answered (always true)."""
    process_tracking: str
    """cgroup, subreaper or marker: what "nothing is left behind" rests on (as `ping`)."""
    persistence: str
    """sqlite, or memory when the state directory cannot be used (as `ping`)."""
    require_preflight: bool
    """True: a spawn runs only with a valid `preflightId` (as `ping`'s `admission`)."""
    require_egress_consent: bool
    """True: a launch with an agent child runs only with `egressConsent: true` (as `ping`'s
    `admission`)."""
    framing: str
    """`ndjson` or `lsp`: the framing of this connection."""


@attrs.frozen
class ServerCapabilities:
    methods: tuple[str, ...]
    """The methods this server answers, sorted (as `ping`)."""
    notifications: NotificationCapabilities
    """The notifications it sends and those it acts on."""
    backends: tuple[BackendInfo, ...]
    """Each backend (as `ping`), with the CLI version the project's tests run against."""
    limits: Limits
    """Every limit in force (as `ping`)."""
    features: Features
    """What this server does."""


@attrs.frozen
class InitializeResult:
    protocol_version: str
    """The protocol this server speaks (`"1"`), whatever the client asked for."""
    server_info: ServerInfo
    """This server's name and version."""
    session_id: str
    """The session this connection is bound to."""
    capabilities: ServerCapabilities
    """What this server answers, sends, runs and limits."""


# --- spawn, status, stop, preflight, resume (protocol.md §8-§15) -----------------------

MsgToken = int | str


@attrs.frozen
class SpawnParams(LaunchRequest):
    """A launch request (checked by `planning`), and what only `spawn` itself reads."""

    preflight_id: str | None = None
    """A preflight's id: the launch must be exactly what it approved (protocol.md §14.3). Required
    when the server runs with `--require-preflight`."""
    work_done_token: MsgToken | None = None
    """A string or an integer: LSP `$/progress` begin, report and end are sent under it."""


@attrs.frozen
class ResumeRequest:
    run_id: str
    """The run: its id, or a unique prefix of at least 8 characters."""
    message: str
    """The follow-up the new attempt is given (an agent child's must hold more than whitespace)."""
    index: int | None = None
    """The child to resume; absent: the first child that did not complete, else the last."""
    overrides: dict[str, Any] | None = None
    """Only `timeoutMs`, `stallTimeoutMs`, `maxTurns`, `maxTokens` and `maxCostUsd`, each
    lowered, never raised, and `access`, narrowed, never widened; anything else is
    `override-not-allowed`."""


@attrs.frozen
class PreflightParams(SpawnParams):
    """A launch to check (the fields of `spawn`), or `resume`: a resume to approve."""

    resume: ResumeRequest | None = None
    """Present: approve a resume of one child of a finished run (protocol.md §15) instead of
    checking a launch."""


@attrs.frozen
class PreflightResult:
    accepted: bool
    """True when the launch or the resume may go ahead; false with at least one `error`
    diagnostic."""
    diagnostics: tuple[Diagnostic, ...]
    """Every finding, each `error`, `warning` or `info`; always sent, empty when there is none."""
    # A launch:
    fingerprint: str | None = None
    """A launch's: `sha256:v1:` and the SHA-256 of its plan's canonical JSON; absent when no plan
    could be made."""
    plan: NormalizedPlan | None = None
    """A launch's normalized plan (protocol.md §14.1); absent when no plan could be made."""
    receipts: Receipts | None = None
    """A launch's: what its children may do and how each limit is enforced (protocol.md §14.2)."""
    preflight_id: str | None = None
    """An accepted launch's id for `spawn {preflightId}`; absent when rejected or when the server's
    history is in memory only."""
    # A resume:
    contract: Contract | None = None
    """An accepted resume's contract: what it would run (protocol.md §15)."""
    contract_digest: str | None = None
    """An accepted resume's: the contract's `sha256:v1:` digest, which the token is bound to."""
    follow_up_digest: str | None = None
    """An accepted resume's: the `sha256:v1:` digest of its `message`, which the token is bound
    to."""
    token: str | None = None
    """An accepted resume's single-use token for `resume {token}`."""
    # Either: when the preflight id or the token stops being accepted.
    expires_at: datetime | None = None
    """When the `preflightId` or the `token` stops being accepted (`--resume-token-ttl-ms` after it
    was issued); sent with either."""


@attrs.frozen
class ResumeParams:
    token: str
    """The single-use token a `preflight {resume}` issued."""
    mode: str | None = None
    """`background` or `task`; absent: the mode the run's `spawn` answered in (`background` for a
    background member of a mixed `tasks` run), else the configured `default_mode`, else
    `background`."""


# Marks a field whose value's keys are written in its place, not under its name.
INLINE: Final = "inline"


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
    backend: str
    """`command`, `pi`, `claude` or `codex`."""
    status: str
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
    stopped_by: str | None = None
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


@attrs.frozen
class BackgroundMember:
    """A member of a mixed `tasks` run that runs in the background (protocol.md §8.5)."""

    index: int
    """The child's index, as `children` names it."""
    status: str
    """Its status when the snapshot was taken (`queued`, `running`, or how it ended)."""


@attrs.frozen
class StepSnapshot:
    """One workflow step: `pending` until it starts, then its children's outcome."""

    index: int
    """The step's position in `workflow.chain`, from 0."""
    kind: str
    """`prompt` (one agent item), `command` (one command item), `parallel` or `forEach`."""
    status: str
    """`pending` (not started), `running`, or the status it ended with."""
    children: tuple[int, ...]
    """The indices of its children in the run's `children`."""
    label: str | None = None
    """The step's label, when it has one."""
    as_: str | None = None
    """Wire name `as`: the name later steps know its text by, when it has one."""


@attrs.frozen
class WorkflowSnapshot:
    name: str
    """The workflow's `name`."""
    steps: tuple[StepSnapshot, ...]
    """Every step of its chain, in order."""


@attrs.frozen
class EventWire:
    """One event of a run: the params of a `run/event` notification, and an item of the
    `events` that `status {since}` replays."""

    # Written as one object: `runId`, `seq`, `type` and `at`, then the fields of `event` (its
    # class is its `type`: `values/events.py`); read back into the same classes. The schema's
    # `oneOf` is generated from those classes (openrpc/schemas.py).

    run_id: str
    """The run the event belongs to."""
    seq: int
    """From 1 for each run, one more per event, without gaps."""
    at: datetime
    """When it happened."""
    event: Event
    """What happened: its `type` and the fields of that type."""

    @property
    def type(self) -> str:
        """`status`, `child`, `output`, `stderr`, `activity`, or an agent child's `message`, `tool`
        or `usage`."""
        return self.event.type

    # Each field of the event's own type, None where its type has none (`event.text`): as
    # when an event was one object with every field optional. `match event.event` is typed.
    status = EventField[RunStatus]()
    index = EventField[int]()
    text = EventField[str]()
    final = EventField[bool]()
    phase = EventField[Phase]()
    tool_id = EventField[str]()
    name = EventField[str]()
    kind = EventField[ToolKind]()
    summary = EventField[str]()
    is_error = EventField[bool]()
    usage = EventField[Usage]()
    output = EventField[OutputInfo]()


@attrs.frozen
class RunSnapshot(OutcomeFields):
    run_id: str
    """The run's id."""
    session_id: str
    """The session that started it."""
    kind: str
    """`single`, `parallel`, `chain` or `workflow`."""
    status: str
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
    admitted_by: str
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
    reached_limit: str | None = None
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
    already_terminal: bool | None = None
    """`stop` only: true when the run had ended before the stop arrived."""
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


@attrs.frozen
class AgentsListParams:
    all_: bool | None = None
    """Wire name `all`: true lists the agents the configuration disables too, each with
    `disabled` saying why; absent or false: only those `spawn {agent}` can use."""


@attrs.frozen
class AgentDisabledInfo:
    """Why the configuration's `agents` lists disable an agent (protocol.md §19)."""

    by: str
    """`agents.disabled` (a pattern of that list matches the name; it wins over any enabled
    one) or `agents.enabled` (that list does not name the agent)."""
    file: str
    """The configuration file whose list decided."""
    pattern: str | None = None
    """The `agents.disabled` pattern that matches; absent for `agents.enabled`."""


@attrs.frozen
class AgentInfo:
    """One agent definition, with what it would run with: one `spawn {agent}` can use,
    or (listed with `all: true`) one the configuration disables."""

    name: str
    """The definition's name (matched case-insensitively)."""
    description: str
    """Its frontmatter's `description`."""
    source: str
    """`user` or `project`: where the definition was found."""
    path: str
    """The definition file's path."""
    digest: str
    """`sha256:v1:` and the SHA-256 of the file's bytes."""
    model: str | None = None
    """The model a spawn of it would run with today (profiles and defaults applied); absent when
    none is set."""
    effort: str | None = None
    """The thinking effort a spawn of it would run with today; absent when none is set."""
    tools: tuple[str, ...] | None = None
    """The tools a spawn of it would get; absent: the backend's own default."""
    mode: str | None = None
    """`task` or `background`: the mode of a single spawn of it that names none; absent when none is
    set."""
    disabled: AgentDisabledInfo | None = None
    """Present when the configuration disables the agent (only with `all: true`): a spawn
    of it is refused with `agent-disabled`."""


@attrs.frozen
class AgentsListResult:
    agents: tuple[AgentInfo, ...]
    """The definitions `spawn {agent}` can use (with `all: true`, every usable definition,
    the disabled ones marked)."""
    diagnostics: tuple[Diagnostic, ...]
    """Problems of the definitions (their `path` is the file) and of the configuration files."""


@attrs.frozen
class StopParams:
    run_id: str
    """The run: its id, or a unique prefix of at least 8 characters."""
    grace_ms: int | None = None
    """Milliseconds between SIGTERM and SIGKILL, 0..86400000; absent: the server's `--grace-ms`."""
    reason: str | None = None
    """The cancelled run's `reason`; absent: "stopped by the client"."""


@attrs.frozen
class DetachParams:
    run_id: str
    """The run's full id: its waiting `task`-mode requests are answered now."""


@attrs.frozen
class NoParams:
    """No params: omitted, `{}` or `[]` (LSP's `shutdown` and `exit` take none)."""


@attrs.frozen
class InitializedParams:
    """LSP's `initialized` params: an empty object."""


@attrs.frozen
class WorkDoneProgressCancelParams:
    token: MsgToken
    """The `workDoneToken` of a spawn: the run reporting progress under it is stopped."""


# --- the converter ---------------------------------------------------------------------


def _strict(kind: type[T], expected: str) -> Callable[[Any, type], T]:
    def structure(value: Any, _type: type) -> T:
        # bool is an int in Python, but never on the wire.
        if type(value) is bool and kind is not bool:
            raise WireValueError(f"expected {expected}, got a boolean")
        if not isinstance(value, kind):
            raise WireValueError(f"expected {expected}, got {json_type_name(value)}")
        return value

    return structure


def _structure_float(value: Any, _type: type) -> float:
    if type(value) is bool or not isinstance(value, int | float):
        raise WireValueError(f"expected a number, got {json_type_name(value)}")
    return float(value)


def _structure_number(value: Any, _type: type) -> int | float:
    """An integer or a number as it came (`LimitReceipt.value`: a count, or dollars)."""
    if type(value) is bool or not isinstance(value, int | float):
        raise WireValueError(f"expected a number, got {json_type_name(value)}")
    return value


def json_type_name(value: Any) -> str:
    """How a client would name the JSON type of `value`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _omitted(attribute: attrs.Attribute[Any]) -> bool:
    """Left out while it is None; an inline group is left out while empty (so that cattrs
    writes it in its place, among the other optional fields, not ahead of them)."""
    return attribute.default is None or bool(attribute.metadata.get(INLINE))


def make_converter(*, forbid_extra_keys: bool = True) -> cattrs.Converter:
    """Build the converter for every wire type (one per server; cheap to build for tests).

    The server reads params with unknown keys refused (the default). The client
    (`subagent_host.client`) reads results with `forbid_extra_keys=False`: a newer
    server may add fields, which an older client then ignores.
    """
    converter = cattrs.Converter(forbid_extra_keys=forbid_extra_keys)
    converter.register_structure_hook(str, _strict(str, "a string"))
    converter.register_structure_hook(int, _strict(int, "an integer"))
    converter.register_structure_hook(bool, _strict(bool, "a boolean"))
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook_func(lambda t: t == int | float, _structure_number)
    converter.register_structure_hook(SessionId, _structure_session_id)
    converter.register_unstructure_hook(datetime, timestamp)
    converter.register_structure_hook(datetime, _structure_moment)
    converter.register_structure_hook_func(
        lambda t: t in (MsgToken, MsgToken | None), _structure_token
    )
    converter.register_structure_hook_func(lambda t: t == StreamChoice, _structure_stream)
    converter.register_structure_hook_func(lambda t: t == tuple[str, ...], _structure_strings)
    converter.register_structure_hook_func(lambda t: t == dict[str, str], _structure_string_map)
    converter.register_structure_hook_func(lambda t: t == dict[str, Any], _structure_object)
    converter.register_structure_hook_func(
        lambda t: t == tuple[SpawnItem, ...], _items_hook(converter)
    )
    converter.register_structure_hook_func(
        lambda t: t == tuple[WorkflowStep, ...], _steps_hook(converter)
    )
    # Results, as a client reads them back (the server only writes these).
    converter.register_structure_hook_func(
        lambda t: t == str | None | Unprobed, _structure_probed_version
    )
    converter.register_structure_hook_func(
        lambda t: t == StatusResult, _status_result_hook(converter)
    )
    # An event: the envelope's keys and its type's fields in one object. Its enumerations
    # are read as their members (a StrEnum would otherwise take `str`'s hook, unchecked).
    for enumeration in EVENT_ENUMS:
        converter.register_structure_hook(enumeration, _structure_member)
    converter.register_unstructure_hook(EventWire, _event_unstructure_hook(converter))
    converter.register_structure_hook(EventWire, _event_structure_hook(converter))

    def structure_factory(cls: type[Any]) -> Any:
        attrs.resolve_types(cls)
        inline = [a for a in attrs.fields(cls) if a.metadata.get(INLINE)]
        overrides: dict[str, Any] = {
            a.name: override(rename=camel_case(a.name), omit=a in inline) for a in attrs.fields(cls)
        }
        plain: Callable[[Any, type], Any] = make_dict_structure_fn(
            cls, converter, _cattrs_forbid_extra_keys=forbid_extra_keys, **overrides
        )
        if absent := _nullable_without_default(cls):
            plain = _absent_as_null(plain, absent)
        return _gathering(converter, plain, inline) if inline else plain

    def unstructure_factory(cls: type[Any]) -> Any:
        overrides: dict[str, Any] = {
            a.name: override(rename=camel_case(a.name), omit_if_default=_omitted(a))
            for a in attrs.fields(cls)
        }
        plain = make_dict_unstructure_fn(cls, converter, **overrides)
        inline = {camel_case(a.name) for a in attrs.fields(cls) if a.metadata.get(INLINE)}
        return _inlining(plain, inline) if inline else plain

    converter.register_structure_hook_factory(attrs.has, structure_factory)
    converter.register_unstructure_hook_factory(attrs.has, unstructure_factory)
    # The plan, receipts and contract are written as planning writes them: what a
    # client sees is exactly what was fingerprinted (planning/views.py), null members
    # left out as everywhere on the wire.
    converter.register_unstructure_hook_func(lambda t: t in VIEWS, view_json)
    return converter


def _nullable_without_default(cls: type[Any]) -> tuple[str, ...]:
    """Wire names of `cls`'s fields that may be null but have no default (a projection's
    `model`, `label`, ...): stored with their nulls, written to the wire without them."""
    return tuple(
        camel_case(a.name)
        for a in attrs.fields(cls)
        if a.default is attrs.NOTHING and type(None) in get_args(a.type)
    )


def _absent_as_null(
    plain: Callable[[Any, type], Any], names: tuple[str, ...]
) -> Callable[[Any, type], Any]:
    """Read an absent member of `names` as null: absent fields are omitted, never null."""

    def structure(value: Any, cls: type) -> Any:
        if isinstance(value, dict) and any(name not in value for name in names):
            value = {**dict.fromkeys(names), **value}
        return plain(value, cls)

    return structure


def _gathering(
    converter: cattrs.Converter,
    plain: Callable[[Any, type], Any],
    inline: list[attrs.Attribute[Any]],
) -> Callable[[Any, type], Any]:
    """Read the `inline` fields back from the keys written in their place (see `INLINE`)."""
    groups = [(a.name, _attrs_type(a)) for a in inline]
    keys = {name: {camel_case(f.name) for f in attrs.fields(kind)} for name, kind in groups}

    def structure(value: Any, cls: type) -> Any:
        if not isinstance(value, dict):
            raise WireValueError(f"expected an object, got {json_type_name(value)}")
        rest = dict(value)
        parts = {
            name: converter.structure(
                {key: rest.pop(key) for key in keys[name] if key in rest}, kind
            )
            for name, kind in groups
        }
        return attrs.evolve(plain(rest, cls), **parts)

    return structure


def _attrs_type(attribute: attrs.Attribute[Any]) -> type[Any]:
    kind = attribute.type
    if not (isinstance(kind, type) and attrs.has(kind)):
        raise TypeError(f"inline field {attribute.name} must be an attrs class")
    return kind


def _structure_stream(value: Any, _type: type) -> bool | str | None:
    """`stream`: a boolean, or `"raw"`."""
    if value is None or type(value) is bool or value == RAW_STREAM:
        return value  # type: ignore[no-any-return]
    raise WireValueError(f'expected a boolean or "{RAW_STREAM}", got {json_type_name(value)}')


def _structure_member(value: Any, kind: type[enum.StrEnum]) -> enum.StrEnum:
    """A member of a string enumeration, by its value."""
    text = _strict(str, "a string")(value, str)
    try:
        return kind(text)
    except ValueError:
        expected = ", ".join(str(member) for member in kind)
        raise WireValueError(f"expected one of {expected}, got {text[:40]!r}") from None


def _structure_moment(value: Any, _type: type) -> datetime:
    """A moment as `timestamp` writes it (any ISO 8601 time with a zone is read)."""
    text = _strict(str, "a string")(value, str)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise WireValueError(f"expected an ISO 8601 time, got {text[:40]!r}") from None
    if moment.tzinfo is None:
        raise WireValueError(f"expected a time with its zone, got {text[:40]!r}")
    return moment


def _structure_probed_version(value: Any, _type: type) -> str | None:
    """A receipt's `version`: a string, or null when the CLI gave none (absent: unprobed)."""
    return None if value is None else _strict(str, "a string")(value, str)


def _event_unstructure_hook(converter: cattrs.Converter) -> Callable[[EventWire], dict[str, Any]]:
    def unstructure(wire: EventWire) -> dict[str, Any]:
        head = {"runId": wire.run_id, "seq": wire.seq, "type": wire.type, "at": timestamp(wire.at)}
        fields: dict[str, Any] = converter.unstructure(wire.event, type(wire.event))
        return {**head, **fields}

    return unstructure


@attrs.frozen
class _EventHead:
    """The keys every `run/event` carries besides its type's fields, read as any wire type."""

    run_id: str
    seq: int
    type: str
    at: datetime


_EVENT_HEAD: Final = ("runId", "seq", "type", "at")


def _event_structure_hook(converter: cattrs.Converter) -> Callable[[Any, type], EventWire]:
    def structure(value: Any, _type: type) -> EventWire:
        if not isinstance(value, dict):
            raise WireValueError(f"expected an object, got {json_type_name(value)}")
        head = converter.structure({k: v for k, v in value.items() if k in _EVENT_HEAD}, _EventHead)
        kind = EVENT_CLASSES.get(head.type)
        if kind is None:
            raise WireValueError(f"expected an event type, got {head.type[:40]!r}")
        fields = {k: v for k, v in value.items() if k not in _EVENT_HEAD}
        event = converter.structure(fields, kind)
        return EventWire(run_id=head.run_id, seq=head.seq, at=head.at, event=event)

    return structure


def _status_result_hook(converter: cattrs.Converter) -> Callable[[Any, type], StatusResult]:
    def structure(value: Any, _type: type) -> StatusResult:
        if isinstance(value, dict) and "runs" in value:
            return converter.structure(value, RunList)
        return converter.structure(value, RunSnapshot)

    return structure


def view_json(view: object) -> dict[str, Any]:
    """A plan, receipts or contract as the wire writes it: `to_json`'s form without null
    members. A stored projection keeps its nulls (it is stored as it always was); digests
    are unchanged, as canonical JSON leaves null members out (planning/fingerprint.py)."""
    written: dict[str, Any] = without_nulls(to_json(view))
    return written


def without_nulls(value: Any) -> Any:
    """`value` with every null member of every object left out (array items are kept)."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def _inlining(
    plain: Callable[[Any], dict[str, Any]], inline: set[str]
) -> Callable[[Any], dict[str, Any]]:
    """Write the `inline` fields' keys in their place, in their order (see `INLINE`)."""

    def unstructure(value: Any) -> dict[str, Any]:
        written: dict[str, Any] = {}
        for key, item in plain(value).items():
            if key in inline:
                written.update(item)
            else:
                written[key] = item
        return written

    return unstructure


def _structure_token(value: Any, _type: type) -> MsgToken | None:
    if value is None or type(value) is int or isinstance(value, str):
        return value
    raise WireValueError(f"expected a string or an integer, got {json_type_name(value)}")


def _structure_strings(value: Any, _type: type) -> tuple[str, ...]:
    # A bare string is not a list of strings (cattrs would split it into letters).
    if not isinstance(value, list):
        raise WireValueError(f"expected an array of strings, got {json_type_name(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise WireValueError(f"item {index}: expected a string, got {json_type_name(item)}")
    return tuple(value)


def _structure_string_map(value: Any, _type: type) -> dict[str, str]:
    if not isinstance(value, dict):
        raise WireValueError(f"expected an object, got {json_type_name(value)}")
    for key, item in value.items():
        if not isinstance(item, str):
            raise WireValueError(f"{key}: expected a string, got {json_type_name(item)}")
    return dict(value)


def _structure_object(value: Any, _type: type) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WireValueError(f"expected an object, got {json_type_name(value)}")
    return dict(value)


def _items_hook(converter: cattrs.Converter) -> Callable[[Any, type], tuple[SpawnItem, ...]]:
    """Items of `tasks`/`chain`: an array of objects, every bad item reported with its index."""

    def structure(value: Any, _type: type) -> tuple[SpawnItem, ...]:
        if not isinstance(value, list):
            raise WireValueError(f"expected an array, got {json_type_name(value)}")
        items, errors = [], []
        for index, raw in enumerate(value):
            try:
                items.append(converter.structure(raw, SpawnItem))
            except Exception as exc:  # noqa: BLE001 - collected and re-raised below
                exc.__notes__ = [IterableValidationNote(f"item {index}", index, SpawnItem)]
                errors.append(exc)
        if errors:
            raise IterableValidationError("invalid items", errors, tuple)
        return tuple(items)

    return structure


def _step_type(raw: Any) -> type:
    """Which kind of step an object is: by its `parallel` or `forEach` key, else an item."""
    if isinstance(raw, dict):
        if "parallel" in raw:
            return ParallelStep
        if "forEach" in raw:
            return ForEachStep
    return SpawnItem


def _steps_hook(converter: cattrs.Converter) -> Callable[[Any, type], tuple[WorkflowStep, ...]]:
    """A workflow's `chain`: items, `parallel` groups and `forEach` fan-outs, each checked."""

    def structure(value: Any, _type: type) -> tuple[WorkflowStep, ...]:
        if not isinstance(value, list):
            raise WireValueError(f"expected an array, got {json_type_name(value)}")
        steps: list[WorkflowStep] = []
        errors: list[Exception] = []
        for index, raw in enumerate(value):
            kind = _step_type(raw)
            try:
                steps.append(converter.structure(raw, kind))
            except Exception as exc:  # noqa: BLE001 - collected and re-raised below
                exc.__notes__ = [IterableValidationNote(f"step {index}", index, kind)]
                errors.append(exc)
        if errors:
            raise IterableValidationError("invalid steps", errors, tuple)
        return tuple(steps)

    return structure
