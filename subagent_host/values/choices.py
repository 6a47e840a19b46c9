"""The fixed sets of words the wire's fields take, each declared once, as a type.

A field that reports one of these is typed with its enumeration (a `StrEnum`: its
members are the very strings the wire, the store and the logs carry), and the
OpenRPC document lists the values from that type (`openrpc/schemas.py`): there is no
table of fields beside the types. The enumerations live here, below every layer that
produces them (the run state machine, the supervisor, the store, the agent
definitions, the configuration), because the wire's types (`rpc/wire/`) and the
plan's views name them too and may import nothing above `values`.

A field the server reads before it checks it (a launch's `mode`, `sessionResources`,
`isolation`, ...) stays a `str`, annotated with `OneOf` its enumeration: a value
outside it must reach the check that names it (a preflight's `invalid-isolation`), not
fail the whole request as a shape error. A `backend` is a `str` too, matching a pattern
(`Matching`): configuration names backends of its own.

Imports nothing of ours (an import-linter contract keeps it so).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from typing import Annotated, Final, TypeVar

E = TypeVar("E", bound=enum.StrEnum)


def member(kind: type[E], value: str | None) -> E | None:
    """The member of `kind` that `value` names; None for None, and for a value outside it
    (a value read as a `str` is checked where it is read, which reports that)."""
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        return None


class OneOf:
    """The values a `str` field's schema lists (`Annotated[str, OneOf(...)]`): for a field
    that is not closed in Python, which the OpenRPC document still enumerates."""

    __slots__ = ("values",)

    def __init__(self, values: Iterable[str]) -> None:
        self.values: Final = tuple(str(value) for value in values)

    def __repr__(self) -> str:
        return f"OneOf({self.values!r})"


class Matching:
    """A `str` field whose values the schema cannot list (some are the user's names),
    written as the pattern they match, with the values every server has as examples
    (`Annotated[str, Matching(pattern, examples)]`)."""

    __slots__ = ("examples", "pattern")

    def __init__(self, pattern: re.Pattern[str], examples: Iterable[str]) -> None:
        self.pattern: Final = pattern
        self.examples: Final = tuple(examples)

    def __repr__(self) -> str:
        return f"Matching({self.pattern.pattern!r}, {self.examples!r})"


# The backends a child may run with. Deliberately a `str`, not an enumeration the core
# switches on: configuration names further backends (any agent that speaks ACP, named
# by the user), so the schema shows the pattern a name matches, with these as examples.
BACKENDS: Final = ("command", "pi", "claude", "codex")
"""The built-in backends."""
AGENT_BACKENDS: Final = tuple(name for name in BACKENDS if name != "command")
"""The built-in backends that run an agent CLI (all but `command`)."""
ACP: Final = "acp"
"""The `protocol` of a configured backend: an agent that speaks the Agent Client Protocol."""
BACKEND_NAME: Final = re.compile(r"[a-z][a-z0-9-]{0,31}")
"""What a backend's name looks like, a configured one's or a built-in one's."""
BackendName = Annotated[str, Matching(BACKEND_NAME, BACKENDS)]
"""A backend's name: `command`, `pi`, `claude`, `codex`, or a configured ACP agent's."""
AgentBackendName = Annotated[str, Matching(BACKEND_NAME, AGENT_BACKENDS)]
"""An agent backend's name: `pi`, `claude` or `codex`, or a configured ACP agent's."""


def is_backend_name(name: str) -> bool:
    """Whether `name` can name a backend: a built-in one or a configured ACP agent."""
    return BACKEND_NAME.fullmatch(name) is not None


class StoppedBy(enum.StrEnum):
    """How the direct child ended: on its own, or by which signal of the stop sequence.

    Only the direct child counts: a child that exited on its own is `exit` even
    when what it left behind needed SIGKILL (that shows in `leftovers_ended`).
    A signal from elsewhere (the OOM killer, a user's `kill`) is `exit` too: the
    exit status names it.
    """

    EXIT = "exit"
    SIGTERM = "sigterm"  # it was running when the stop sequence sent SIGTERM
    SIGKILL = "sigkill"  # it was still running when the grace was over


class TrackingMode(enum.StrEnum):
    """How the server finds every process a child started (backends/tracking.py), best
    first: what "nothing is left behind" rests on (protocol.md §8.3)."""

    CGROUP = "cgroup"
    SUBREAPER = "subreaper"
    MARKER = "marker"


class Persistence(enum.StrEnum):
    """Where the server keeps its history (protocol.md §13)."""

    SQLITE = "sqlite"
    MEMORY = "memory"
    """The state directory cannot be used: nothing outlives the server."""


class StepStatus(enum.StrEnum):
    """A workflow step's status: `pending` until it starts, `running`, then the terminal
    status of its children's outcome (`RunStatus`'s terminal ones, in its order)."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed-out"
    LIMIT_REACHED = "limit-reached"
    INTERRUPTED = "interrupted"


class AdmittedBy(enum.StrEnum):
    """How a run's spawn was admitted (the admission policy, `--require-preflight`)."""

    PREFLIGHT = "preflight"
    """With a valid `preflightId`."""
    DIRECT = "direct"


class ReachedLimit(enum.StrEnum):
    """Which limit a `limit-reached` run reached (its `reachedLimit`, its child's `reason`)."""

    MAX_TURNS = "max-turns"
    """A child began more model responses than its `maxTurns` allows (claude's own
    `error_max_turns`, or the server's count)."""
    MAX_TOKENS = "max-tokens"
    MAX_COST = "max-cost"


class SessionDigestSource(enum.StrEnum):
    """When the digest of an agent CLI's session file was taken (backends/sessions.py)."""

    ATTEMPT_END = "attempt-end"
    RECOVERED = "recovered"
    """By the server that recovered the run of a server that died."""


class Effect(enum.StrEnum):
    """What a tool can do; a request's `access` removes tools with effects beyond it."""

    FILESYSTEM_READ = "filesystem-read"
    FILESYSTEM_WRITE = "filesystem-write"
    PROCESS = "process"
    NETWORK = "network"


class AgentSource(enum.StrEnum):
    """Where an agent definition was found: the user's directory or the project's."""

    USER = "user"
    PROJECT = "project"


class DisabledBy(enum.StrEnum):
    """Which of the configuration's `agents` lists disables an agent (protocol.md §19)."""

    ENABLED = "agents.enabled"
    """The `enabled` list does not name it."""
    DISABLED = "agents.disabled"
    """A pattern of the `disabled` list matches it."""


class Approvals(enum.StrEnum):
    """Who answers the tool uses a child asks permission for (protocol.md §23.4): a
    launch-level setting. A CLI that cannot ask takes only `cli`
    (`approvals-unsupported`)."""

    CLI = "cli"
    """Nobody: the CLI's own non-interactive rules decide (a one-shot child's)."""
    CLIENT = "client"
    """A client of the run's session, through `run/permit`."""
    POLICY = "policy"
    """The host, from the child's `access`."""


class Delivery(enum.StrEnum):
    """How a live message is to reach the model (`run/send`'s `delivery`)."""

    QUEUE = "queue"
    """When the current turn ends (or at once, when no turn runs)."""
    STEER = "steer"
    """Into the current turn, where the CLI can take it there (else queued)."""


class DeliveryState(enum.StrEnum):
    """Where a live message is (`run/send`'s reply, an `input` event's `state`)."""

    DELIVERED = "delivered"
    """Written to the child (acceptance does not prove the model read it)."""
    QUEUED = "queued"
    """Waiting for the current turn to end."""
    DROPPED = "dropped"
    """Still queued when the child ended: never replayed into a later attempt."""
    REFUSED = "refused"
    """The CLI refused it and lives on (its reason in the event's `reason`)."""


class TurnState(enum.StrEnum):
    """An interactive child's turn: its model works on a message, or it waits for one."""

    RUNNING = "running"
    WAITING = "waiting"


class PermissionStage(enum.StrEnum):
    """A `permission` event's stage: asked, answered, or withdrawn by the CLI."""

    ASKED = "asked"
    ANSWERED = "answered"
    WITHDRAWN = "withdrawn"


class OptionKind(enum.StrEnum):
    """A permission answer's kind, modelled on ACP's permission options."""

    ALLOW_ONCE = "allow-once"
    ALLOW_ALWAYS = "allow-always"
    REJECT_ONCE = "reject-once"
    REJECT_ALWAYS = "reject-always"

    @property
    def allows(self) -> bool:
        return self in (OptionKind.ALLOW_ONCE, OptionKind.ALLOW_ALWAYS)


class ToolKind(enum.StrEnum):
    """What a tool does, in ACP's words (agentclientprotocol.com, `ToolKind`)."""

    READ = "read"
    EDIT = "edit"
    DELETE = "delete"
    MOVE = "move"
    SEARCH = "search"
    EXECUTE = "execute"
    THINK = "think"
    FETCH = "fetch"
    OTHER = "other"


class PlanPriority(enum.StrEnum):
    """A plan entry's importance, in ACP's words (`PlanEntryPriority`)."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class PlanStatus(enum.StrEnum):
    """A plan entry's progress, in ACP's words (`PlanEntryStatus`)."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class Phase(enum.StrEnum):
    """A `tool` event's moment: the call began, or its result is back."""

    START = "start"
    END = "end"
