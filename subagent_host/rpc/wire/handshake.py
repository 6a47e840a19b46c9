"""The first exchange: `ping`, `initialize` and LSP's `initialized`, `shutdown` and `exit`."""

from __future__ import annotations

from typing import Annotated, Any, Final

import attrs

from subagent_host.rpc.wire.basics import MsgToken, SessionId
from subagent_host.values.choices import OneOf, Persistence, TrackingMode
from subagent_host.values.facts import BackendInfo


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
    process_tracking: TrackingMode
    """cgroup, subreaper or marker: what "nothing is left behind" rests on (protocol.md §8.7)."""
    persistence: Persistence
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
"""LSP's `TraceValue`s, which `initialize`'s `trace` may be (a `str` field: the handler
checks it, answering invalid params that name it)."""


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
    trace: Annotated[str, OneOf(TRACE_VALUES)] | None = None
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


@attrs.frozen
class NoParams:
    """No params: omitted, `{}` or `[]` (LSP's `shutdown` and `exit` take none)."""


@attrs.frozen
class InitializedParams:
    """LSP's `initialized` params: an empty object."""
