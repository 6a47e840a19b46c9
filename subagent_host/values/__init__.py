"""Plain values that several layers name: the session-id rule, the framings, and
(in `values.facts`) what runs report.

Imports nothing of ours (an import-linter contract keeps it so), so
`settings/` and `config.py` can check a session id or name a framing without
importing the wire layer (`rpc/`), and `rpc/` uses the very same values. The
package's own `__init__` stays free of attrs: `--version` and `--help` load it.
"""

from __future__ import annotations

import enum
import re
from typing import Final

# Session ids are chosen by clients, stored, and shown in logs: keep them plain.
SESSION_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
SESSION_ID_RULE: Final = "1-128 characters of A-Z a-z 0-9 . _ : -, starting with a letter or digit"


class Framing(enum.StrEnum):
    """A concrete framing of messages on stdio (protocol.md §2); `auto` is not one:
    the server resolves it from the first byte a client sends (rpc/framing.py)."""

    LSP = "lsp"
    NDJSON = "ndjson"


class RunKind(enum.StrEnum):
    """The shapes of a launch (protocol.md §3): one child, parallel tasks, a chain, a workflow."""

    SINGLE = "single"
    PARALLEL = "parallel"
    CHAIN = "chain"
    WORKFLOW = "workflow"


class RunStatus(enum.StrEnum):
    """A run's, a child's or an attempt's status (protocol.md §12): `queued`, `running`, then
    one terminal status; every change goes through `runs/state.py`."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed-out"
    LIMIT_REACHED = "limit-reached"
    INTERRUPTED = "interrupted"


# The statuses a run or child ends with; a client's events of a run end at one of them.
TERMINAL: Final = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.TIMED_OUT,
        RunStatus.LIMIT_REACHED,
        RunStatus.INTERRUPTED,
    }
)

# The framing option's values: either framing, or `auto` (resolved from the first byte).
FRAMINGS: Final = ("auto", *Framing)


class Mode(enum.StrEnum):
    """How a spawn answers (protocol.md §3): `task` replies when the run has ended,
    `background` at once with its run id. Agent definitions and settings name a default."""

    TASK = "task"
    BACKGROUND = "background"


TASK_MODE: Final = Mode.TASK
BACKGROUND_MODE: Final = Mode.BACKGROUND
MODES: Final = tuple(Mode)

# The effort (thinking level) an agent definition or a setting may ask of a model.
EFFORTS: Final = ("off", "minimal", "low", "medium", "high", "xhigh", "max")


class SessionResources(enum.StrEnum):
    """What an agent child loads of the user's and the project's own resources."""

    LEAN = "lean"
    """As little as the CLI allows: no extensions, skills, prompt templates, context files."""
    FULL = "full"
    """Whatever the CLI loads by itself."""


LEAN: Final = SessionResources.LEAN
FULL: Final = SessionResources.FULL
SESSION_RESOURCES: Final = tuple(SessionResources)


class Isolation(enum.StrEnum):
    """Where a child works (protocol.md §8.7): `worktree` gives it a git worktree and a
    branch of its own, so children editing the same checkout never trample each other."""

    WORKTREE = "worktree"


WORKTREE: Final = Isolation.WORKTREE
ISOLATIONS: Final = tuple(Isolation)

# Digests of what a client may compare across servers (plan fingerprints, agent
# definition files): this prefix, then the SHA-256 in hex; `v1` names the scheme.
DIGEST_PREFIX: Final = "sha256:v1:"

# The longest duration any option, setting or param may name: a day.
MAX_DURATION_MS: Final = 24 * 60 * 60 * 1000
# The largest integer every JSON reader holds exactly (a double's 53 bits): the most a
# count without a natural bound (`maxTokens`) may be.
MAX_SAFE_INTEGER: Final = 2**53 - 1

# How deep a child is in a tree of servers: set for every child (one more than
# ours), read by the command line of a server started inside one.
DEPTH_VARIABLE: Final = "SUBAGENT_HOST_DEPTH"


def camel_case(name: str) -> str:
    """`enforced_timeout_ms` -> `enforcedTimeoutMs`; a trailing `_` (a name that would be a
    Python keyword) is dropped. A field whose wire name differs declares it (`wire_names.py`)."""
    head, *rest = name.removesuffix("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class StepKind(enum.StrEnum):
    """A workflow step's kinds (protocol.md §17), as planned, fingerprinted and stored."""

    PROMPT = "prompt"
    PARALLEL = "parallel"
    FOR_EACH = "forEach"


class ReportedStepKind(enum.StrEnum):
    """A step's kind as a RunSnapshot reports it: a `prompt` step whose one item runs a
    command is `command` (§17). Only reported: a plan, its fingerprint and a stored
    definition say `prompt`, as before, so what earlier runs stored and were bound to
    stays the same."""

    PROMPT = "prompt"
    COMMAND = "command"
    PARALLEL = "parallel"
    FOR_EACH = "forEach"


STEP_PROMPT: Final = StepKind.PROMPT
STEP_PARALLEL: Final = StepKind.PARALLEL
STEP_FOR_EACH: Final = StepKind.FOR_EACH
STEP_COMMAND: Final = ReportedStepKind.COMMAND
