"""The server's configuration: every default limit and every option (protocol.md §5, §7)
in one frozen object.

`command_line.py` builds it from the command line over the configuration files
(`settings/`); `app.py` hands it to whoever needs it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import attrs
import platformdirs

from subagent_host import SERVER_NAME
from subagent_host.settings import ExecutorChoice, Settings
from subagent_host.values import Framing

KIB: Final = 1024
MIB: Final = 1024 * KIB

# The defaults of protocol.md §5 (limits) and §7 (options).
DEFAULT_MAX_CONCURRENCY: Final = 4
DEFAULT_MAX_QUEUE: Final = 1_000
DEFAULT_MAX_PARALLEL: Final = 8
DEFAULT_WORKFLOW_PARALLELISM: Final = 4
DEFAULT_TIMEOUT_MS: Final = 1_200_000
DEFAULT_STALL_TIMEOUT_MS: Final = 240_000
# An interactive child's wait for input after a turn, and a client's for a permission (§23).
DEFAULT_IDLE_TIMEOUT_MS: Final = 600_000
DEFAULT_PERMISSION_TIMEOUT_MS: Final = 300_000
DEFAULT_GRACE_MS: Final = 5_000
OUTPUT_CAP_BYTES: Final = 48 * KIB
OUTPUT_CAP_LINES: Final = 600
PARALLEL_OUTPUT_CAP_BYTES: Final = 12 * KIB
PARALLEL_OUTPUT_CAP_LINES: Final = 160
PREVIOUS_CAP_BYTES: Final = 64 * KIB
DEFAULT_HISTORY_LIMIT: Final = 100
DEFAULT_RESUME_TOKEN_TTL_MS: Final = 300_000
DEFAULT_MAX_MESSAGE_BYTES: Final = 16 * MIB
DEFAULT_MAX_DEPTH: Final = 1
DEFAULT_LOG_LEVEL: Final = "WARNING"
DEFAULT_LOG_FORMAT: Final = "text"


def user_config_dir() -> Path:
    """Where the global `subagents.json` and the user's agent definitions live."""
    return platformdirs.user_config_path(SERVER_NAME)


def working_project() -> Path:
    """The project this server serves: its working directory, symlinks resolved.

    Raises OSError when the working directory no longer exists.
    """
    return Path(os.path.realpath(os.getcwd()))


@attrs.frozen(kw_only=True, cache_hash=True)
class ServerConfig:
    """Everything the server was told to do, with the defaults."""

    state_dir: Path
    session_id: str | None = None
    framing: Framing | None = None
    """A forced framing; None detects it from the first byte (`--framing auto`)."""
    process_tracking: str = "auto"
    """auto (the best this host allows), or a forced cgroup, subreaper or marker."""
    executor: ExecutorChoice = attrs.Factory(ExecutorChoice)
    """Where children run: here (`local`, the default) or on a Ray cluster (`ray`)."""
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    max_queue: int = DEFAULT_MAX_QUEUE
    """Children waiting `queued` across the server; a spawn or resume beyond it is -32005."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    grace_ms: int = DEFAULT_GRACE_MS
    resume_token_ttl_ms: int = DEFAULT_RESUME_TOKEN_TTL_MS
    history_limit: int = DEFAULT_HISTORY_LIMIT
    """Runs kept per session; older ones are pruned."""
    max_parallel: int = DEFAULT_MAX_PARALLEL
    """Items of a `tasks` spawn, and of a workflow's `parallel` step."""
    workflow_parallelism: int = DEFAULT_WORKFLOW_PARALLELISM
    """Children of one workflow step running at once."""
    output_cap_bytes: int = OUTPUT_CAP_BYTES
    output_cap_lines: int = OUTPUT_CAP_LINES
    previous_cap_bytes: int = PREVIOUS_CAP_BYTES
    config_file: Path | None = None
    """The `--config` file, if one was named."""
    trusted_projects: tuple[Path, ...] = ()
    """`--trust-project` directories, then the files' `trusted_projects`."""
    require_preflight: bool = False
    """Admission policy: a `spawn` without a valid `preflightId` is refused."""
    require_egress_consent: bool = False
    """Admission policy: a launch with an agent child without `egressConsent: true` is refused."""
    log_level: str = DEFAULT_LOG_LEVEL
    log_file: Path | None = None
    log_format: str = DEFAULT_LOG_FORMAT
    """`text` or `json` (logs.py)."""
    # Read from the environment, not the command line: how deep in a delegation
    # chain this server runs (a child server sees its parent's depth + 1).
    depth: int = 0
    max_depth: int = DEFAULT_MAX_DEPTH
    settings: Settings = attrs.Factory(Settings)
    """What the configuration files said: agent defaults, model profiles, backend
    programs, and the diagnostics to log. The server options above already include
    the files' values."""
    config_dir: Path = attrs.Factory(user_config_dir)
    """The user's configuration directory: `subagents.json`, `agents/`, `subagents/`."""
    project_dir: Path = attrs.Factory(working_project)
    project_trusted: bool = False
    """Whether the project's `.pi/` agents and `subagents.json` are used."""

    @property
    def default_timeout_ms(self) -> int:
        return self.settings.timeout_ms or DEFAULT_TIMEOUT_MS

    @property
    def default_stall_timeout_ms(self) -> int:
        return self.settings.stall_timeout_ms or DEFAULT_STALL_TIMEOUT_MS
