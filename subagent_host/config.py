"""The server's configuration: every CONTRACT §6 default and §7 option in one frozen object.

`cli.py` builds it from the command line; `app.py` hands it to whoever needs it.
Options whose feature has not landed yet are still parsed, validated and kept
here, so scripts written today keep working as features arrive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import attrs

from subagent_host.rpc.framing import Framing

KIB: Final = 1024
MIB: Final = 1024 * KIB

# CONTRACT §6 defaults.
DEFAULT_MAX_CONCURRENCY: Final = 4
DEFAULT_MAX_PARALLEL: Final = 8
DEFAULT_WORKFLOW_PARALLELISM: Final = 4
DEFAULT_TIMEOUT_MS: Final = 1_200_000
DEFAULT_STALL_TIMEOUT_MS: Final = 240_000
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


@attrs.frozen(kw_only=True, cache_hash=True)
class ServerConfig:
    """Everything the server was told to do, with the contract's defaults."""

    state_dir: Path
    session_id: str | None = None
    framing: Framing | None = None
    """A forced framing; None detects it from the first byte (`--framing auto`)."""
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    grace_ms: int = DEFAULT_GRACE_MS
    resume_token_ttl_ms: int = DEFAULT_RESUME_TOKEN_TTL_MS
    history_limit: int = DEFAULT_HISTORY_LIMIT
    """Runs kept per session; older ones are pruned."""
    config_file: Path | None = None
    trusted_projects: tuple[Path, ...] = ()
    log_level: str = "WARNING"
    log_file: Path | None = None
    # Read from the environment, not the command line: how deep in a delegation
    # chain this server runs (a child server sees its parent's depth + 1).
    depth: int = 0
    max_depth: int = DEFAULT_MAX_DEPTH
