"""The public types of the settings: what a merged `Settings` holds, the problems
found on the way, the file names and the ranges a value must fall in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

import attrs

from subagent_host.settings.agent_filter import AgentFilter
from subagent_host.values.facts import Severity

FILE_NAME: Final = "subagents.json"
PROJECT_FILE: Final = Path(".pi") / FILE_NAME

# The ranges the command line accepts; a file is held to the same ones.
# Below MIN_MESSAGE_BYTES a single ping could not fit; above MAX_MESSAGE_BYTES one
# message could exhaust memory.
MIN_MESSAGE_BYTES: Final = 1024
MAX_MESSAGE_BYTES: Final = 1024 * 1024 * 1024
MAX_CONCURRENCY: Final = 256
MAX_QUEUE: Final = 1_000_000
MAX_HISTORY_LIMIT: Final = 1_000_000
# A token that expires within a second could never be used.
MIN_RESUME_TOKEN_TTL_MS: Final = 1000
MAX_PARALLEL: Final = 64
MIN_CAP_BYTES: Final = 1024
MAX_CAP_BYTES: Final = 16 * 1024 * 1024
MAX_CAP_LINES: Final = 1_000_000

# How the server finds every process a child started (backends/tracking.py).
PROCESS_TRACKING: Final = ("auto", "cgroup", "subreaper", "marker")
# Where children run (executors/): here, or on a Ray cluster.
LOCAL: Final = "local"
RAY: Final = "ray"
EXECUTORS: Final = (LOCAL, RAY)
LOG_LEVELS: Final = ("debug", "info", "warning", "error", "critical")
# `text` for a person, `json` (one object per line) for a machine (logs.py).
LOG_FORMATS: Final = ("text", "json")
# The severity of a problem the server does not start with.
ERROR: Final = "error"


@attrs.frozen
class SettingsDiagnostic:
    """One problem found in a configuration file; the server logs it and goes on."""

    severity: Severity
    """`error` (a safety setting, or a whole file, cannot be read: the server does not
    start), `warning` (a field or file was ignored) or `info` (worth knowing, nothing
    ignored that was meant to be read)."""
    code: str
    """unreadable, invalid-json, not-an-object, invalid-field, unknown-field,
    not-allowed-in-project, conflicting-aliases, untrusted-project."""
    message: str
    """One line naming the file and the field."""
    file: str
    """The path of the file it was found in."""
    field: str | None = None
    """A dotted path (`model_profiles.scout.model`); None for the whole file."""


@attrs.frozen
class ExecutorChoice:
    """Where the server runs its children (`executor` in a file, `--executor` on the
    command line; protocol.md §19)."""

    kind: str = LOCAL
    """`local` (this machine, the supervisor) or `ray` (a Ray cluster)."""
    address: str | None = None
    """The cluster to join (`ray`): `HOST:PORT` of its head, or `auto`; None: `auto`."""
    namespace: str | None = None
    """The Ray namespace the server's actors live in; None: the server's own."""


@attrs.frozen
class ModelProfile:
    """The model and effort one agent runs with unless the spawn names its own."""

    model: str | None = None
    """`provider/id`; None: not set."""
    effort: str | None = None
    """A thinking effort, `off` … `max`; None: not set."""


@attrs.frozen
class AcpBackendSetting:
    """An agent that speaks the Agent Client Protocol, configured as a backend of its own
    (`backends.<name> = {protocol: "acp", executable, args, env}`; protocol.md §24.1)."""

    executable: str
    """The program, looked up on the child's PATH unless a path."""
    args: tuple[str, ...] = ()
    """Its arguments (what starts its ACP mode: `--acp`, `acp`, ...)."""
    env: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    """Variables its children get, under a request's own `env`."""


NO_PROFILES: Final[Mapping[str, ModelProfile]] = MappingProxyType({})
NO_EXECUTABLES: Final[Mapping[str, str]] = MappingProxyType({})
NO_ACP_BACKENDS: Final[Mapping[str, AcpBackendSetting]] = MappingProxyType({})


@attrs.frozen
class Settings:
    """What the files said, merged; None (or empty) means no file set it."""

    default_model: str | None = None
    """`provider/id`: the model of agent children that name none (after profiles and
    definitions)."""
    default_effort: str | None = None
    """Their thinking effort, likewise (also spelled `default_thinking_level`, `thinkingLevel`)."""
    timeout_ms: int | None = None
    """Every child's default `timeoutMs`, in milliseconds."""
    stall_timeout_ms: int | None = None
    """Every child's default `stallTimeoutMs`, in milliseconds."""
    max_tokens: int | None = None
    """Every agent child's default `maxTokens` (where its CLI reports tokens while it runs)."""
    max_cost_usd: float | None = None
    """Every agent child's default `maxCostUsd`, in US dollars (where its CLI reports cost
    while it runs)."""
    max_concurrency: int | None = None
    """As `--max-concurrency`."""
    max_queue: int | None = None
    """As `--max-queue`: children waiting `queued` across the server before a spawn is refused."""
    default_tools: tuple[str, ...] | None = None
    """Tools of agent children that name none and whose definition names none."""
    default_mode: str | None = None
    """`task` or `background`: the mode of a spawn (or resume) that names none."""
    history_limit: int | None = None
    """Runs kept per session, as `--history-limit`."""
    enable_continue: bool | None = None
    """False disables resume."""
    default_backend: str | None = None
    """`command`, `pi`, `claude`, `codex` or a configured ACP agent's name: the backend of an
    item that names none and has no `command`."""
    session_resources: str | None = None
    """`lean` or `full`: what agent children load (unset: `lean`)."""
    approvals: str | None = None
    """`cli`, `client` or `policy`: who answers the permissions of children whose request and
    definition name none (unset: `cli`)."""
    user_profiles: Mapping[str, ModelProfile] = attrs.field(default=NO_PROFILES, hash=False)
    """By lowercase agent name, from the global and `--config` files: for the user's agents."""
    project_profiles: Mapping[str, ModelProfile] = attrs.field(default=NO_PROFILES, hash=False)
    """By lowercase agent name, from the project's file: for the project's agents."""
    backend_executables: Mapping[str, str] = attrs.field(default=NO_EXECUTABLES, hash=False)
    """The program each agent backend runs, by backend id, where a file set one."""
    acp_backends: Mapping[str, AcpBackendSetting] = attrs.field(default=NO_ACP_BACKENDS, hash=False)
    """The ACP agents configured as backends (`backends.<name>` with `protocol: "acp"`),
    by name, from the global and `--config` files."""
    state_dir: Path | None = None
    """As `--state-dir`."""
    framing: str | None = None
    """auto, lsp or ndjson."""
    process_tracking: str | None = None
    """auto, cgroup, subreaper or marker."""
    executor: ExecutorChoice | None = None
    """Where children run (`executor: {kind, address, namespace}`)."""
    max_message_bytes: int | None = None
    """As `--max-message-bytes`."""
    grace_ms: int | None = None
    """As `--grace-ms`: milliseconds between SIGTERM and SIGKILL."""
    resume_token_ttl_ms: int | None = None
    """As `--resume-token-ttl-ms`: the lifetime of a resume token and a `preflightId`, in
    milliseconds."""
    log_level: str | None = None
    """Upper case, as `logging` spells it."""
    log_file: Path | None = None
    """As `--log-file`."""
    log_format: str | None = None
    """As `--log-format`: `text` or `json`."""
    session: str | None = None
    """The session the connection is bound to from the start (as `--session`)."""
    max_parallel: int | None = None
    """Items of a `tasks` spawn or a workflow's `parallel` step (unset: 8)."""
    workflow_parallelism: int | None = None
    """Children of one workflow step running at once (unset: 4)."""
    output_cap_bytes: int | None = None
    """A child's output cap in bytes (unset: 48 KiB)."""
    output_cap_lines: int | None = None
    """A child's output cap in lines (unset: 600)."""
    previous_cap_bytes: int | None = None
    """The cap of `{previous}`, `{outputs.NAME}` and `{item}`, in bytes (unset: 64 KiB)."""
    require_preflight: bool | None = None
    """True: a `spawn` must carry a valid `preflightId` (`--require-preflight`)."""
    require_egress_consent: bool | None = None
    """True: a launch with an agent child must carry `egressConsent: true`
    (`--require-egress-consent`)."""
    trusted_projects: tuple[Path, ...] = ()
    """Resolved, from the global and `--config` files together."""
    agents: AgentFilter = attrs.Factory(AgentFilter)
    """The agents that may be delegated to (`agents: {enabled, disabled}`); empty: all."""
    files: tuple[str, ...] = ()
    """The files whose settings were used, lowest precedence first."""
    diagnostics: tuple[SettingsDiagnostic, ...] = ()
    """The problems found in the files."""

    @property
    def refusal(self) -> SettingsDiagnostic | None:
        """The first problem the server must not start with, if any (protocol.md §19)."""
        return next((note for note in self.diagnostics if note.severity == ERROR), None)
