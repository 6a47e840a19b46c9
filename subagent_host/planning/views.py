"""How a plan is shown and sealed: the normalized plan, its receipts, a child's launch
projection and a resume's contract, as typed values.

These are views of a `LaunchPlan` (made in `normalized.py`, `receipts.py`,
`projection.py`). The wire carries them as they are (`PreflightResult` in
`rpc/wire/`), the fingerprint seals them and the store keeps projections, all
through `to_json`: one converter, so what preflight shows, what a fingerprint
covers and what is stored are the same JSON. Its rules are the wire's: fields
are camelCase, or the wire name a field declares (`values/wire_names.py`); a
field whose default is None is left out while it is None; a field without a
default is always written, null included (a projection is stored so); the wire
then leaves null members out (`rpc/wire/`), which changes no digest: canonical
JSON omits them too. A workflow's plan holds its steps as `PlanStep`s, the very
type its normalized plan shows.
Fields are declared in the order their keys have always been written (a
projection, stored with its keys sorted and shown in a contract as it was read
back, is written with sorted keys), so the JSON is byte for byte what earlier
versions produced, and the fingerprints (`sha256:v1:`) of earlier plans and the
digests of stored projections stay valid.

Imports nothing of ours but `values` (an import-linter contract keeps it so):
the wire imports this module without the rest of planning.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import attrs
import cattrs
from attrs import AttrsInstance
from cattrs.gen import make_dict_structure_fn, override
from cattrs.types import SimpleStructureHook

from subagent_host.planning.request import FilesystemAccess
from subagent_host.values import Isolation, RunKind, SessionResources, StepKind
from subagent_host.values.choices import (
    AgentBackendName,
    AgentSource,
    Approvals,
    BackendName,
    Effect,
    SessionDigestSource,
)
from subagent_host.values.copying import shared
from subagent_host.values.facts import Executable
from subagent_host.values.json_values import JsonObject, JsonValue
from subagent_host.values.placement import Placement
from subagent_host.values.wire_names import WIRE_NAME, wire_name

T = TypeVar("T")

PROJECTION_VERSION: Final = 1


# --- what several views hold ------------------------------------------------------------


@attrs.frozen
class Access:
    """What a request lets its children do (all of it by default; `access.py` says what
    each level permits)."""

    filesystem: FilesystemAccess = FilesystemAccess.WRITE
    """`none`, `read` or `write`."""
    process: bool = True
    """Whether tools that can start processes are kept."""
    network: bool = True
    """Whether tools that can reach the network are kept."""


@attrs.frozen
class AgentRef:
    """The agent definition a child was launched from: which file, and its digest."""

    name: str
    """The definition's name."""
    source: AgentSource
    """`user` or `project`."""
    path: str
    """The definition file's real path."""
    digest: str
    """`sha256:v1:` and the SHA-256 of the file's bytes."""


@attrs.frozen(kw_only=True)
class ChildLimits:
    """A child's own limits (`maxTurns`, `maxTokens` and `maxCostUsd` only when they were
    set: projections stored before they existed stay valid)."""

    timeout_ms: int
    """Milliseconds the child may run (wire name `timeoutMs`)."""
    stall_timeout_ms: int
    """Milliseconds it may go without output (wire name `stallTimeoutMs`)."""
    max_turns: int | None = None
    """Model responses it may make (wire name `maxTurns`); absent: no limit."""
    max_tokens: int | None = None
    """Input and output tokens it may spend (wire name `maxTokens`); absent: no limit."""
    max_cost_usd: float | None = None
    """US dollars it may spend (wire name `maxCostUsd`); absent: no limit."""
    idle_timeout_ms: int | None = None
    """An interactive child's wait for input after a turn, in milliseconds (wire name
    `idleTimeoutMs`); absent for a child that is not interactive."""
    permission_timeout_ms: int | None = None
    """Milliseconds a permission may go unanswered (wire name `permissionTimeoutMs`); absent
    unless a client answers them (`approvals: "client"`)."""


@attrs.frozen
class ToolEffects:
    """A tool and the effects it has (`backends/base.py` EFFECTS)."""

    name: str
    """The tool's name, as its CLI knows it."""
    effects: tuple[Effect, ...]
    """Every effect it can have: `filesystem-read`, `filesystem-write`, `process`, `network`."""


# --- the normalized plan: what preflight shows and a fingerprint seals -------------------


@attrs.frozen
class PlannedPlacement(Placement):
    """A child's `placement` as its plan shows it (the request's own type, on the result
    side of the wire)."""

    @classmethod
    def of(cls, placement: Placement | None) -> PlannedPlacement | None:
        return None if placement is None else shared(cls, placement)

    def requested(self) -> Placement:
        """The request's own placement again (a resume plans its child with it)."""
        return shared(Placement, self)


@attrs.frozen(kw_only=True)
class PlanChild:
    """One child as the plan shows it (environment values left out: they may be secrets)."""

    index: int
    """From 0; in a workflow, an item template's index (steps refer to it)."""
    backend: BackendName
    """`command`, `pi`, `claude`, `codex` or a configured ACP agent's name (protocol.md §24.1)."""
    argv: tuple[str, ...]
    """The argv as it would be executed."""
    cwd: str
    """The resolved working directory."""
    model: str | None = None
    """An agent child's model, when it has one."""
    thinking: str | None = None
    """An agent child's thinking effort, when it has one."""
    session_resources: SessionResources | None = None
    """An agent child's `lean` or `full`; absent for a `command` child."""
    tools: tuple[str, ...]
    """The names of the tools it gets once access is applied, sorted."""
    env_keys: tuple[str, ...]
    """The names of its `env` variables, sorted (values are never part of a plan)."""
    prompt_digest: str | None = None
    """`sha256:v1:` of its prompt (a workflow item's: of the template); absent without a prompt."""
    limits: ChildLimits
    """Its own `timeoutMs`, `stallTimeoutMs`, `maxTurns`, `maxTokens` and `maxCostUsd`."""
    removed_tools: tuple[str, ...] | None = None
    """The tools access took away, sorted; absent when none."""
    agent: AgentRef | None = None
    """The agent definition it runs, when it runs one."""
    output_name: str | None = attrs.field(default=None, metadata={WIRE_NAME: "as"})
    """Wire name `as`: a workflow item's output name."""
    isolation: Isolation | None = None
    """`worktree` when it runs in a git worktree of its own; absent otherwise (so the
    fingerprints of plans without it are what they always were)."""
    placement: PlannedPlacement | None = None
    """Where on a cluster it must run (protocol.md §8.8), as asked; absent otherwise."""
    redact: bool | None = None
    """False when long base64-like runs of its output are kept (`redact: false`, protocol.md
    §12.1); absent otherwise."""
    interactive: bool | None = None
    """True when it lives on after its first turn (protocol.md §23); absent otherwise (so
    the fingerprints of plans without it are what they always were)."""
    approvals: Approvals | None = None
    """`client` or `policy`: who answers its permissions; absent for `cli`."""


# The one type of a planned step: the plan's own (`WorkflowPlan.steps`, which a
# workflow's stored definition keeps) and, as it is, the normalized plan's, which a
# fingerprint seals. A step as requested is `request.WorkflowStep`; as it runs,
# `values.steps.StepState`.
@attrs.frozen(kw_only=True)
class PlanStep:
    """A workflow step; `items` are indices into the plan's children (item templates)."""

    index: int
    """The step's position in the chain, from 0."""
    kind: StepKind
    """`prompt`, `parallel` or `forEach`."""
    items: tuple[int, ...]
    """Indices into the plan's `children`: the step's item templates."""
    output_name: str | None = attrs.field(default=None, metadata={WIRE_NAME: "as"})
    """Wire name `as`: the step's output name."""
    over: str | None = attrs.field(default=None, metadata={WIRE_NAME: "forEach"})
    """Wire name `forEach`: a forEach step's template, as written."""
    label: str | None = None
    """The step's label, when it has one."""


@attrs.frozen(kw_only=True)
class PlanWorkflow:
    name: str
    """The workflow's name."""
    task_digest: str
    """`sha256:v1:` of the workflow's `task`."""
    steps: tuple[PlanStep, ...]
    """Its steps, in order."""
    snapshot_path: str | None = None
    """The file its snapshot is rewritten to, when the request names one."""


@attrs.frozen(kw_only=True)
class NormalizedPlan:
    """What a launch would run: `preflight` shows it, and `spawn` and `preflight` both
    fingerprint it."""

    kind: RunKind
    """`single`, `parallel`, `chain` or `workflow`."""
    children: tuple[PlanChild, ...]
    """Each child by index; for a workflow, each item template."""
    access: Access | None = None
    """Only when the request narrowed the default."""
    workflow: PlanWorkflow | None = None
    """A workflow's name, task digest and steps."""
    egress_consent: bool | None = None
    """True when the request gave `egressConsent: true`; absent otherwise (so the
    fingerprints of plans without it are what they always were)."""


# --- receipts: what the children may do, and how each limit is enforced ------------------


class Unprobed(enum.Enum):
    """A child whose CLI was not asked its version (a command child): no `version` key,
    where an agent child whose CLI gave none has `version: null`."""

    UNPROBED = "unprobed"


UNPROBED: Final = Unprobed.UNPROBED


class EgressKind(enum.StrEnum):
    """Where a child's own connection goes (an `Egress`'s `kind`)."""

    MODEL_PROVIDER = "model-provider"
    """An agent CLI talks to its model's provider."""
    UNKNOWN = "unknown"
    """A `command` child: the server cannot tell what a program reaches."""


class ExecutionBoundary(enum.StrEnum):
    """What separates children from the user (an `AccessReceipt`'s): nothing but the
    user's own permissions, today."""

    SHARED_USER = "shared-user"


class Enforcement(enum.StrEnum):
    """How a limit is enforced (a `LimitReceipt`'s)."""

    HOST_HARD = "host-hard"
    """The server ends the tree."""
    BEST_EFFORT = "best-effort"
    """Only asked for."""


@attrs.frozen
class RemovedTool(ToolEffects):
    exceeds: tuple[Effect, ...]
    """The effects the request's access did not permit."""


@attrs.frozen
class Egress:
    """Where a child's own connection goes, whatever its tools may do (protocol.md §14.2)."""

    kind: EgressKind
    """`model-provider` (an agent CLI talks to its model's provider: always, whatever `access`
    says) or `unknown` (a `command` child: the server cannot tell what a program reaches)."""
    backend: AgentBackendName | None = None
    """A `model-provider`'s agent backend: `pi`, `claude` or `codex`."""
    endpoint: str | None = None
    """The provider's base URL, where the child's environment or its CLI's configuration names
    one; absent: the CLI's own default provider."""


@attrs.frozen
class EffectApproval:
    """Whether a child's CLI asks before each use of one effect (an `ApprovalsReceipt`'s)."""

    effect: Effect
    """One effect of its kept tools."""
    enforcement: Enforcement
    """`host-hard`: the CLI asks before every use, and nothing runs unanswered;
    `best-effort`: some use of it runs without asking."""
    how: str
    """One sentence: who answers, or what runs unasked."""


@attrs.frozen
class ApprovalsReceipt:
    """Who answers a child's permissions, and for which of its effects the CLI asks."""

    approvals: Approvals
    """`client` (`run/permit`) or `policy` (the server, from `access`)."""
    effects: tuple[EffectApproval, ...]
    """Each effect of its kept tools, in the order of `effects`."""


@attrs.frozen(kw_only=True)
class ChildReceipt:
    index: int
    """The child's index in the plan."""
    backend: BackendName
    """`command`, `pi`, `claude`, `codex` or a configured ACP agent's name (protocol.md §24.1)."""
    tools: tuple[ToolEffects, ...]
    """The tools it keeps, each with its effects."""
    removed_tools: tuple[RemovedTool, ...]
    """The tools access took away, each with the effects beyond it; empty when none."""
    effects: tuple[Effect, ...]
    """The union of the kept tools' effects: never less than the child can do."""
    restrictable: bool
    """Whether removing tools narrows what it can do (false for a `command` child)."""
    session_resources: SessionResources | None = None
    """An agent child's `lean` or `full`; absent for a `command` child."""
    version: str | None | Unprobed = UNPROBED
    """Its CLI's probed version; absent on the wire when the CLI gave none or was not asked (a
    `command` child)."""
    isolation: Isolation | None = None
    """`worktree` when it works in a git worktree of its own, not in the shared checkout;
    absent otherwise."""
    egress: tuple[Egress, ...]
    """What leaves the machine whatever its tools are: an agent child's connection to its
    model provider, a `command` child's unknown network (always written)."""
    approvals: ApprovalsReceipt | None = None
    """How its permissions are answered, effect by effect; absent for `approvals: "cli"`."""


@attrs.frozen(kw_only=True)
class AccessReceipt:
    execution_boundary: ExecutionBoundary
    """Always `shared-user`: children run with the user's own permissions, not sandboxed."""
    children: tuple[ChildReceipt, ...]
    """What each child may do, by index."""


@attrs.frozen
class LimitReceipt:
    name: str
    """The limit's wire name, e.g. `timeoutMs`, `outputCapBytes` or `maxConcurrency`."""
    value: int | float
    """Its value: milliseconds for a duration, bytes or lines for a cap, US dollars for
    `maxCostUsd`, else a count."""
    enforcement: Enforcement
    """`host-hard` (the server ends the tree) or `best-effort` (only asked for)."""
    how: str
    """One sentence: how the server enforces it."""


@attrs.frozen
class Receipts:
    access: AccessReceipt
    """What the children may do."""
    limits: tuple[LimitReceipt, ...]
    """Each limit offered, with its value and enforcement."""


# --- a launch projection, and the contract a resume runs ---------------------------------


@attrs.frozen(kw_only=True)
class Projection:
    """What one child was launched as, stored beside its digest so a resume runs exactly
    that (`projection.py`). Fields without a default are written even when null."""

    v: int = PROJECTION_VERSION
    """The projection's format version: 1."""
    backend: BackendName
    """`command`, `pi`, `claude`, `codex` or a configured ACP agent's name (protocol.md §24.1)."""
    argv_template: tuple[str, ...]
    """The argv its prepared launch executed."""
    model: str | None
    """Its model; null when it had none."""
    thinking: str | None
    """Its thinking effort; null when it had none."""
    tools: tuple[ToolEffects, ...]
    """Its tools (the backend's default ones when the request named none), each with its effects."""
    cwd: str
    """The resolved working directory."""
    env_keys: tuple[str, ...]
    """The names of its `env` variables, sorted; values are never stored."""
    limits: ChildLimits
    """Its own `timeoutMs`, `stallTimeoutMs`, `maxTurns`, `maxTokens` and `maxCostUsd`."""
    label: str | None
    """Its label; null when it had none."""
    agent: AgentRef | None
    """The definition it came from: a resume refuses unless it is still that file."""
    access: Access | None
    """The request's access, when it narrowed the default: a resume keeps it."""
    instructions: str | None = None
    """The agent definition's body, for a child of a definition."""
    session_resources: SessionResources | None = None
    """Absent in projections recorded before it existed: those children ran `full`."""
    isolation: Isolation | None = None
    """`worktree`: a resume runs in the child's worktree (absent: it had none)."""
    executable: Executable | None = None
    """An agent child's program, as launched: a resume refuses another file or version.
    Absent for a `command` child, and in projections recorded before it existed."""
    redact: bool | None = None
    """False when its request said `redact: false`: a resume redacts the same way (absent:
    true, as for every projection recorded before it existed)."""
    placement: PlannedPlacement | None = None
    """Where on a cluster it ran (protocol.md §8.8): a resume runs it there again. Absent
    when it had none (so the digests of projections without it are what they always were)."""
    interactive: bool | None = None
    """True: it lived on after its turns (protocol.md §23), and a resume is interactive
    again; absent otherwise (so the digests of projections without it stay valid)."""
    approvals: Approvals | None = None
    """`client` or `policy`: a resume's permissions are answered the same way; absent for
    `cli`."""


@attrs.frozen(kw_only=True)
class ContractWorkflow:
    definition_digest: str
    """`sha256:v1:` of the stored workflow definition (its item templates, without environment
    values)."""
    step: int
    """The step the new attempt belongs to."""


@attrs.frozen(kw_only=True)
class Contract:
    """What a resume would run: the stored projection with the allowed overrides applied."""

    v: int = PROJECTION_VERSION
    """The contract's format version: 1."""
    run_id: str
    """The run's full id."""
    index: int
    """The child that would be resumed."""
    attempt: int
    """The attempt it would start: one more than its last."""
    projection: Projection
    """The stored projection with the overrides applied."""
    projection_digest: str
    """The `sha256:v1:` digest of the projection as stored (before the overrides)."""
    backend_session_id: str | None = None
    """The agent CLI's own session the new attempt continues."""
    session_digest: str | None = None
    """`sha256:v1:` of the agent CLI's session file (pi), when one was sealed (protocol.md
    §15.1)."""
    session_digest_source: SessionDigestSource | None = None
    """When `sessionDigest` was taken: `attempt-end`, or `recovered` by the server that recovered
    the run."""
    workflow: ContractWorkflow | None = None
    """A workflow child's: the stored definition's digest and its step."""
    removed_tools: tuple[RemovedTool, ...] | None = None
    """The tools an `access` override took away (each with the effects beyond it); absent when
    the resume narrows nothing."""
    launch_check: str | None = None
    """An agent child's: `verified` (its program and argv were compared with the launch's and
    are the same), or `legacy` (its projection predates the comparison: resumed unchecked)."""


VIEWS: Final = frozenset({NormalizedPlan, Receipts, Projection, Contract})
"""The views the wire carries or the store keeps (`rpc/wire/` writes them with `to_json`)."""


# --- one converter ----------------------------------------------------------------------


def _omitted(attribute: attrs.Attribute[object]) -> bool:
    """Whether a field is left out while it equals its default (None, or UNPROBED)."""
    return attribute.default is None or attribute.default is UNPROBED


@functools.cache
def _converter() -> cattrs.Converter:
    """Built on first use: a server that plans nothing never pays for it."""
    converter = cattrs.Converter(forbid_extra_keys=True)

    def unstructure_factory(cls: type[AttrsInstance]) -> Callable[[AttrsInstance], JsonValue]:
        # By hand, not cattrs' generated function: that writes the fields it may leave
        # out after all the others, and the keys must keep their order (see above).
        fields = [(a.name, wire_name(a), _omitted(a), a.default) for a in attrs.fields(cls)]

        def unstructure(view: AttrsInstance) -> JsonObject:
            data: JsonObject = {}
            for name, key, omitted, default in fields:
                value = getattr(view, name)
                if not (omitted and value is default):
                    data[key] = converter.unstructure(value)
            return data

        if cls is Projection:  # written as it is stored: keys sorted, at every level
            return lambda view: _sorted_keys(unstructure(view))
        return unstructure

    def structure_factory(
        cls: type[AttrsInstance],
    ) -> SimpleStructureHook[Mapping[str, object], AttrsInstance]:
        # Loosely typed: the overrides go in as keyword arguments beside cattrs' own flags.
        overrides: dict[str, Any] = {
            a.name: override(rename=wire_name(a)) for a in attrs.fields(cls)
        }
        return make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **overrides)

    converter.register_unstructure_hook_factory(attrs.has, unstructure_factory)
    converter.register_structure_hook_factory(attrs.has, structure_factory)
    # An enumeration is written as its value, read back as its member (cattrs' own).
    converter.register_unstructure_hook(enum.StrEnum, str)
    return converter


def _sorted_keys(value: JsonValue) -> JsonValue:
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


def to_json(view: object) -> JsonObject:
    """The view as JSON values (camelCase), as the wire shows it and a fingerprint seals it."""
    unstructured: JsonObject = _converter().unstructure(view)
    return unstructured


def from_json(data: Mapping[str, object], kind: type[T]) -> T:
    """A view read back from JSON values; cattrs' errors when it is not of that shape."""
    return _converter().structure(data, kind)
