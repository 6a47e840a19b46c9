"""How a plan is shown and sealed: the normalized plan, its receipts, a child's launch
projection and a resume's contract, as typed values.

These are views of a `LaunchPlan` (made in `normalized.py`, `receipts.py`,
`projection.py`). The wire carries them as they are (`PreflightResult` in
`rpc/wire.py`), the fingerprint seals them and the store keeps projections, all
through `to_json`: one converter, so what preflight shows, what a fingerprint
covers and what is stored are the same JSON. Its rules are the wire's: fields
are camelCase (`values.camel_case`); a field whose default is None is left out
while it is None; a field without a default is always written, null included.
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
from typing import Any, Final, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override

from subagent_host.values import camel_case

T = TypeVar("T")

PROJECTION_VERSION: Final = 1


# --- what several views hold ------------------------------------------------------------


@attrs.frozen
class Access:
    """What a request lets its children do (all of it by default; `access.py` says what
    each level permits)."""

    filesystem: str = "write"
    process: bool = True
    network: bool = True


@attrs.frozen
class AgentRef:
    """The agent definition a child was launched from: which file, and its digest."""

    name: str
    source: str
    """`user` or `project`."""
    path: str
    """The definition file's real path."""
    digest: str


@attrs.frozen(kw_only=True)
class ChildLimits:
    """A child's own limits (`maxTurns` only when it was set: projections stored before
    it existed stay valid)."""

    timeout_ms: int
    stall_timeout_ms: int
    max_turns: int | None = None


@attrs.frozen
class ToolEffects:
    """A tool and the effects it has (`backends/base.py` EFFECTS)."""

    name: str
    effects: tuple[str, ...]


# --- the normalized plan: what preflight shows and a fingerprint seals -------------------


@attrs.frozen(kw_only=True)
class PlanChild:
    """One child as the plan shows it (environment values left out: they may be secrets)."""

    index: int
    backend: str
    argv: tuple[str, ...]
    cwd: str
    model: str | None = None
    thinking: str | None = None
    session_resources: str | None = None
    tools: tuple[str, ...]
    env_keys: tuple[str, ...]
    prompt_digest: str | None = None
    limits: ChildLimits
    removed_tools: tuple[str, ...] | None = None
    agent: AgentRef | None = None
    as_: str | None = None


@attrs.frozen(kw_only=True)
class PlanStep:
    """A workflow step; `items` are indices into the plan's children (item templates)."""

    index: int
    kind: str
    items: tuple[int, ...]
    as_: str | None = None
    for_each: str | None = None
    label: str | None = None


@attrs.frozen(kw_only=True)
class PlanWorkflow:
    name: str
    task_digest: str
    steps: tuple[PlanStep, ...]
    snapshot_path: str | None = None


@attrs.frozen(kw_only=True)
class NormalizedPlan:
    """What a launch would run: `preflight` shows it, and `spawn` and `preflight` both
    fingerprint it."""

    kind: str
    children: tuple[PlanChild, ...]
    access: Access | None = None
    """Only when the request narrowed the default."""
    workflow: PlanWorkflow | None = None


# --- receipts: what the children may do, and how each limit is enforced ------------------


class Unprobed(enum.Enum):
    """A child whose CLI was not asked its version (a command child): no `version` key,
    where an agent child whose CLI gave none has `version: null`."""

    UNPROBED = "unprobed"


UNPROBED: Final = Unprobed.UNPROBED


@attrs.frozen
class RemovedTool(ToolEffects):
    exceeds: tuple[str, ...]
    """The effects the request's access did not permit."""


@attrs.frozen(kw_only=True)
class ChildReceipt:
    index: int
    backend: str
    tools: tuple[ToolEffects, ...]
    removed_tools: tuple[RemovedTool, ...]
    effects: tuple[str, ...]
    restrictable: bool
    session_resources: str | None = None
    version: str | None | Unprobed = UNPROBED


@attrs.frozen(kw_only=True)
class AccessReceipt:
    execution_boundary: str
    children: tuple[ChildReceipt, ...]


@attrs.frozen
class LimitReceipt:
    name: str
    value: int
    enforcement: str
    """`host-hard` (the server ends the tree) or `best-effort` (only asked for)."""
    how: str


@attrs.frozen
class Receipts:
    access: AccessReceipt
    limits: tuple[LimitReceipt, ...]


# --- a launch projection, and the contract a resume runs ---------------------------------


@attrs.frozen(kw_only=True)
class Projection:
    """What one child was launched as, stored beside its digest so a resume runs exactly
    that (`projection.py`). Fields without a default are written even when null."""

    v: int = PROJECTION_VERSION
    backend: str
    argv_template: tuple[str, ...]
    model: str | None
    thinking: str | None
    tools: tuple[ToolEffects, ...]
    cwd: str
    env_keys: tuple[str, ...]
    limits: ChildLimits
    label: str | None
    agent: AgentRef | None
    """The definition it came from: a resume refuses unless it is still that file."""
    access: Access | None
    """The request's access, when it narrowed the default: a resume keeps it."""
    instructions: str | None = None
    session_resources: str | None = None
    """Absent in projections recorded before it existed: those children ran `full`."""


@attrs.frozen(kw_only=True)
class ContractWorkflow:
    definition_digest: str
    step: int


@attrs.frozen(kw_only=True)
class Contract:
    """What a resume would run: the stored projection with the allowed overrides applied."""

    v: int = PROJECTION_VERSION
    run_id: str
    index: int
    attempt: int
    projection: Projection
    projection_digest: str
    backend_session_id: str | None = None
    """The agent CLI's own session the new attempt continues."""
    session_digest: str | None = None
    session_digest_source: str | None = None
    workflow: ContractWorkflow | None = None


VIEWS: Final = frozenset({NormalizedPlan, Receipts, Projection, Contract})
"""The views the wire carries or the store keeps (`rpc/wire.py` writes them with `to_json`)."""


# --- one converter ----------------------------------------------------------------------


def _omitted(attribute: attrs.Attribute[Any]) -> bool:
    """Whether a field is left out while it equals its default (None, or UNPROBED)."""
    return attribute.default is None or attribute.default is UNPROBED


@functools.cache
def _converter() -> cattrs.Converter:
    """Built on first use: a server that plans nothing never pays for it."""
    converter = cattrs.Converter(forbid_extra_keys=True)

    def unstructure_factory(cls: type[Any]) -> Any:
        # By hand, not cattrs' generated function: that writes the fields it may leave
        # out after all the others, and the keys must keep their order (see above).
        fields = [(a.name, camel_case(a.name), _omitted(a), a.default) for a in attrs.fields(cls)]

        def unstructure(view: Any) -> dict[str, Any]:
            data: dict[str, Any] = {}
            for name, key, omitted, default in fields:
                value = getattr(view, name)
                if not (omitted and value is default):
                    data[key] = converter.unstructure(value)
            return data

        if cls is Projection:  # written as it is stored: keys sorted, at every level
            return lambda view: _sorted_keys(unstructure(view))
        return unstructure

    def structure_factory(cls: type[Any]) -> Any:
        overrides: dict[str, Any] = {
            a.name: override(rename=camel_case(a.name)) for a in attrs.fields(cls)
        }
        return make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **overrides)

    converter.register_unstructure_hook_factory(attrs.has, unstructure_factory)
    converter.register_structure_hook_factory(attrs.has, structure_factory)
    return converter


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


def to_json(view: object) -> dict[str, Any]:
    """The view as JSON values (camelCase), as the wire shows it and a fingerprint seals it."""
    unstructured: dict[str, Any] = _converter().unstructure(view)
    return unstructured


def from_json(data: Any, kind: type[T]) -> T:
    """A view read back from JSON values; cattrs' errors when it is not of that shape."""
    return _converter().structure(data, kind)
