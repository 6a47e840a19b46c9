"""What a launch request says: the params of `spawn` and `preflight` that planning reads.

Plain attrs values that import nothing of ours but `values` (an import-linter
contract keeps it so): `rpc/wire/` builds them from JSON with its converter (camelCase on the
wire, strict primitives) and `planning/` checks them, so the wire and the domain
share one set of types instead of copying fields between twins.
"""

from __future__ import annotations

import enum
from typing import Annotated, Final, Literal

import attrs

from subagent_host.values import Isolation, Mode, SessionResources
from subagent_host.values.choices import Approvals, BackendName, OneOf
from subagent_host.values.placement import Placement
from subagent_host.values.wire_names import WIRE_NAME

RAW_STREAM: Final = "raw"
"""`stream`'s one string value: an agent child's raw output lines too."""
StreamChoice = bool | Literal["raw"] | None
"""What `stream` takes: `true`, `false` or `"raw"` (absent: false)."""


class FilesystemAccess(enum.StrEnum):
    """What children may do to files (`access.filesystem`), least first; `access.py` says
    which tool effects each level permits."""

    NONE = "none"
    READ = "read"
    WRITE = "write"


# The fields below that name one of a fixed set are read as the strings the client sent
# (`OneOf` gives the schema their values): planning checks them, so that a value outside
# the set is a finding with its own code and path (`invalid-isolation`), not a request
# the wire refuses whole. What planning makes of them is typed with the enumeration.


@attrs.frozen
class ItemFields:
    """What an item and the call both take; an item's own value overrides the call's."""

    prompt: str | None = None
    """The task text: an agent child's task, or a `command` child's stdin (which may be empty)."""
    agent: str | None = None
    """The name of an agent definition to run (protocol.md §18)."""
    command: tuple[str, ...] | None = None
    """A `command` child's argv (no shell)."""
    label: str | None = None
    """Shown in snapshots and in `$/progress`."""
    backend: BackendName | None = None
    """`command`, `pi`, `claude`, `codex` or a configured ACP agent's name (§24.1);
    absent: chosen as protocol.md §8.1 says."""
    model: str | None = None
    """An agent child's model (agent backends only)."""
    thinking: str | None = None
    """An agent child's thinking effort, `off` … `max` as its backend takes it (agent backends
    only)."""
    tools: tuple[str, ...] | None = None
    """The tools an agent child gets (agent backends only); absent: its definition's, the configured
    `default_tools`, else the backend's own."""
    cwd: str | None = None
    """The working directory; must resolve to an existing directory; absent: the server's."""
    env: dict[str, str] | None = None
    """Variables added to the child's environment (an item's merged over the call's); the values
    never appear in a plan."""
    timeout_ms: int | None = None
    """Milliseconds a child may run, 1..86400000; then it is ended: `timed-out`, reason
    `timeout`."""
    stall_timeout_ms: int | None = None
    """Milliseconds without output, 1..86400000, after which a child is ended: `timed-out`, reason
    `stall`."""
    session_resources: Annotated[str, OneOf(SessionResources)] | None = None
    """`lean` or `full`: what an agent child loads of the user's and project's resources."""
    max_turns: int | None = None
    """Model responses an agent child may make (protocol.md §8.1); agent backends only."""
    max_tokens: int | None = None
    """Input and output tokens an agent child may spend, 1..2^53-1 (protocol.md §8.1); agent
    backends whose CLI reports tokens while it runs (pi, claude)."""
    max_cost_usd: float | None = None
    """US dollars an agent child may spend, above 0 (protocol.md §8.1); agent backends whose
    CLI reports cost while it runs (pi)."""
    isolation: Annotated[str, OneOf(Isolation)] | None = None
    """`worktree`: the child works in a git worktree and on a branch of its own (protocol.md
    §8.7); absent: in its `cwd` itself (an agent definition may ask for a worktree)."""
    placement: Placement | None = None
    """Where on a cluster the child runs (protocol.md §8.8); refused by the local executor."""
    redact: bool | None = None
    """False: long base64-like runs in the child's output are kept (protocol.md §12.1); the
    values of its secret environment variables are redacted all the same. Absent: true."""
    interactive: bool | None = None
    """True: the child lives on after its first turn and takes live messages (protocol.md §23);
    absent: its agent definition's `interactive`, else false."""
    approvals: Annotated[str, OneOf(Approvals)] | None = None
    """Who answers the tool uses the child asks permission for: `cli` (its CLI's own rules),
    `client` (`run/permit`) or `policy` (the server, from `access`); protocol.md §23.4.
    Absent: its agent definition's, else the configured `approvals`, else `cli`."""
    idle_timeout_ms: int | None = None
    """An interactive child's: milliseconds, 1..86400000, it may wait for input after a turn
    ended before it is closed (default 600000)."""
    permission_timeout_ms: int | None = None
    """Milliseconds, 1..86400000, a permission asked under `approvals: "client"` may go
    unanswered before it is rejected (default 300000)."""


@attrs.frozen
class SpawnItem(ItemFields):
    """One child of a `tasks` or `chain` spawn."""

    output_name: str | None = attrs.field(default=None, metadata={WIRE_NAME: "as"})
    """Wire name `as`: a workflow item's output name, for `{outputs.NAME}` in later steps."""


@attrs.frozen
class StepFields:
    """What a `parallel` and a `forEach` step both take."""

    output_name: str | None = attrs.field(default=None, metadata={WIRE_NAME: "as"})
    """Names the step's output: a JSON array of its items' final texts."""
    label: str | None = None
    """The step's label, shown in its snapshot."""


@attrs.frozen(kw_only=True)
class ParallelStep(StepFields):
    """A workflow step running its items side by side (at most 4 at once)."""

    parallel: tuple[SpawnItem, ...]
    """The step's items, 1..8."""


@attrs.frozen(kw_only=True)
class ForEachStep(StepFields):
    """A workflow step running `item` once per element of the JSON array `forEach` yields."""

    over: str = attrs.field(metadata={WIRE_NAME: "forEach"})
    """Wire name `forEach`: a template whose text must be a JSON array (at most 32 elements)."""
    item: SpawnItem
    """The item run once per element; `{item}` and `{index}` are filled in it."""


WorkflowStep = SpawnItem | ParallelStep | ForEachStep
"""A workflow step as requested: an item, a `parallel` group or a `forEach` fan-out. Planned,
it is a `PlanStep` (planning/views.py); run, a `StepState` (values/steps.py)."""


@attrs.frozen
class WorkflowRequest:
    name: str
    """The workflow's name, shown in its snapshot."""
    task: str
    """What `{task}` stands for in the templates."""
    chain: tuple[WorkflowStep, ...]
    """1..32 steps run in order: items, `parallel` groups and `forEach` fan-outs."""
    snapshot_path: str | None = None
    """A file rewritten (atomically, mode 0600) with the run's snapshot after each step."""


@attrs.frozen
class AccessRequest:
    """What the children may do: tools with larger effects are removed (preflight)."""

    filesystem: Annotated[str, OneOf(FilesystemAccess)] | None = None
    """`none`, `read` or `write` (the default)."""
    process: bool | None = None
    """False removes every tool that can start processes (default: allowed)."""
    network: bool | None = None
    """False removes every tool that can reach the network (default: allowed)."""


@attrs.frozen
class LaunchRequest(ItemFields):
    """A launch: one item (the call's own prompt/agent/command), `tasks`, `chain` or a
    `workflow`, with what applies to all of its children."""

    tasks: tuple[SpawnItem, ...] | None = None
    """Items run in parallel, 1..8 (`max_parallel`)."""
    chain: tuple[SpawnItem, ...] | None = None
    """Items run in order, 1..32; `{previous}` in a prompt is the previous child's final text."""
    workflow: WorkflowRequest | None = None
    """Steps that fan out and gather (protocol.md §17)."""
    mode: Annotated[str, OneOf(Mode)] | None = None
    """`background` (answered at once) or `task` (answered when the run is terminal), for every
    member; absent: a single agent and each member of `tasks` resolve their own (the agent
    definition's `subagent_mode`, else the configured `default_mode`, else `background`), and
    a `tasks` run whose members differ answers once its `task` members have ended."""
    stream: StreamChoice = None
    """`true`: each child's events are sent as they happen: a command's stdout as `output` events
    and its stderr as `stderr` events, an agent's `message`, `tool` and `usage` events; `"raw"`:
    an agent's raw output lines as `output` events (and its stderr as `stderr` events) too;
    absent or `false`: neither."""
    access: AccessRequest | None = None
    """What the children may do; absent: everything."""
    required_limits: tuple[str, ...] | None = None
    """Limits that must be enforced by the server itself (`host-hard`)."""
    egress_consent: bool | None = None
    """`true`: the caller agrees that its agent children send their prompts, files and tool
    output to their model providers (receipts `egress`). Part of the fingerprint; required for a
    launch with an agent child when the server runs with `--require-egress-consent`."""
