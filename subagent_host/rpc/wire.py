"""Every type that crosses the wire, and the one cattrs converter that reads and writes them.

Fields are snake_case in Python and camelCase on the wire. A field whose value is
`None` is omitted from what we send; a field that must always be sent has no
default. Moments are `datetime`s, written as `timestamp` spells them. What runs
report (usage, output, error, resources, diagnostics, summaries) is not copied
into twins here: those types (`values/facts.py`) are sent as they are. Unknown
keys in params are rejected, and primitives are checked, not coerced: cattrs on
its own would turn `"false"` into `True` and `3.7` into `3`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, NewType, TypeVar

import attrs
import cattrs
from cattrs.errors import IterableValidationError, IterableValidationNote
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from subagent_host.planning.request import (
    AccessRequest,
    ForEachStep,
    ItemFields,
    LaunchRequest,
    ParallelStep,
    SpawnItem,
    WorkflowRequest,
    WorkflowStep,
)
from subagent_host.planning.views import VIEWS, Contract, NormalizedPlan, Receipts, to_json
from subagent_host.values import SESSION_ID_PATTERN, SESSION_ID_RULE, camel_case
from subagent_host.values.facts import (
    BackendInfo,
    Diagnostic,
    ErrorInfo,
    OutputInfo,
    Resources,
    RunSummary,
    Usage,
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


# --- ping (CONTRACT §2) ---------------------------------------------------------------


@attrs.frozen
class PingParams:
    session_id: SessionId | None = None
    """Bind this connection to an existing session; without it the connection keeps its own."""


@attrs.frozen
class ServerInfo:
    name: str
    version: str


@attrs.frozen
class Limits:
    max_concurrency: int
    max_parallel: int
    grace_ms: int
    default_timeout_ms: int
    default_stall_timeout_ms: int
    output_cap_bytes: int
    output_cap_lines: int
    previous_cap_bytes: int
    max_message_bytes: int


@attrs.frozen
class Admission:
    require_preflight: bool
    """True: a spawn runs only with a valid `preflightId`. No default: `false` is sent too."""


@attrs.frozen
class PingResult:
    pong: bool
    server: ServerInfo
    protocol_version: str
    session_id: str
    methods: tuple[str, ...]
    backends: tuple[BackendInfo, ...]
    limits: Limits
    process_tracking: str
    """cgroup, subreaper or marker: what "nothing is left behind" rests on (protocol.md §8.3)."""
    persistence: str
    """sqlite, or memory when the state directory cannot be used (protocol.md §13)."""
    admission: Admission
    """The admission policy spawns are held to."""


# --- spawn, status, stop (CONTRACT §2, §3) ----------------------------------------------

MsgToken = int | str


@attrs.frozen
class SpawnParams(LaunchRequest):
    """A launch request (checked by `planning`), and what only `spawn` itself reads."""

    preflight_id: str | None = None
    work_done_token: MsgToken | None = None


@attrs.frozen
class ResumeRequest:
    run_id: str
    message: str
    index: int | None = None
    overrides: dict[str, Any] | None = None


@attrs.frozen
class PreflightParams(SpawnParams):
    """A launch to check (the fields of `spawn`), or `resume`: a resume to approve."""

    resume: ResumeRequest | None = None


@attrs.frozen
class PreflightResult:
    accepted: bool
    diagnostics: tuple[Diagnostic, ...]
    # A launch:
    fingerprint: str | None = None
    plan: NormalizedPlan | None = None
    receipts: Receipts | None = None
    preflight_id: str | None = None
    # A resume:
    contract: Contract | None = None
    contract_digest: str | None = None
    follow_up_digest: str | None = None
    token: str | None = None
    # Either: when the preflight id or the token stops being accepted.
    expires_at: datetime | None = None


@attrs.frozen
class ResumeParams:
    token: str
    mode: str | None = None


# Marks a field whose value's keys are written in its place, not under its name.
INLINE: Final = "inline"


@attrs.frozen
class RunOutcome:
    """How a run or a child went, in the fields both snapshots carry (written inline:
    their keys stand in the snapshot itself). Each is absent until it is known."""

    started_at: datetime | None = None
    ended_at: datetime | None = None
    duration_ms: int | None = None
    output: OutputInfo | None = None
    error: ErrorInfo | None = None
    reason: str | None = None


@attrs.frozen
class ChildSnapshot:
    index: int
    backend: str
    status: str
    attempt: int
    label: str | None = None
    pid: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    stopped_by: str | None = None
    """`exit`, `sigterm` or `sigkill`: how its process ended (protocol.md §10, §12)."""
    outcome: RunOutcome = attrs.field(factory=RunOutcome, metadata={INLINE: True})
    usage: Usage | None = None
    backend_session_id: str | None = None
    resources: Resources | None = None
    step: int | None = None
    """A workflow child's step."""


@attrs.frozen
class StepSnapshot:
    """One workflow step: `pending` until it starts, then its children's outcome."""

    index: int
    kind: str
    status: str
    children: tuple[int, ...]
    label: str | None = None
    as_: str | None = None


@attrs.frozen
class WorkflowSnapshot:
    name: str
    steps: tuple[StepSnapshot, ...]


@attrs.frozen
class EventWire:
    """A `run/event` as `status {since}` replays it (the notification has the same fields)."""

    run_id: str
    seq: int
    type: str
    at: datetime
    status: str | None = None
    index: int | None = None
    text: str | None = None


@attrs.frozen
class RunSnapshot:
    run_id: str
    session_id: str
    kind: str
    status: str
    created_at: datetime
    fingerprint: str
    last_seq: int
    children: tuple[ChildSnapshot, ...]
    admitted_by: str
    """`preflight` or `direct`: how the spawn was admitted (always sent)."""
    label: str | None = None
    outcome: RunOutcome = attrs.field(factory=RunOutcome, metadata={INLINE: True})
    enforced_timeout_ms: int | None = None
    reached_limit: str | None = None
    workflow: WorkflowSnapshot | None = None
    diagnostics: tuple[Diagnostic, ...] | None = None
    """Warnings about the run (e.g. a skipped `snapshotPath` write); absent when none."""
    already_terminal: bool | None = None
    """`stop` only: true when the run had ended before the stop arrived."""
    events: tuple[EventWire, ...] | None = None
    """`status {since}` only: every retained event after `since`."""
    first_retained_seq: int | None = None
    """`status {since}` only, when events after `since` were dropped: the oldest seq held."""


@attrs.frozen
class RunList:
    runs: tuple[RunSummary, ...]


@attrs.frozen
class StatusParams:
    run_id: str | None = None
    since: int | None = None


@attrs.frozen
class AgentsListParams:
    """`agents/list` takes no params."""


@attrs.frozen
class AgentInfo:
    """One agent definition `spawn {agent}` can use, with what it would run with."""

    name: str
    description: str
    source: str
    path: str
    digest: str
    model: str | None = None
    effort: str | None = None
    tools: tuple[str, ...] | None = None
    mode: str | None = None


@attrs.frozen
class AgentsListResult:
    agents: tuple[AgentInfo, ...]
    diagnostics: tuple[Diagnostic, ...]


@attrs.frozen
class StopParams:
    run_id: str
    grace_ms: int | None = None
    reason: str | None = None


@attrs.frozen
class DetachParams:
    run_id: str


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


def make_converter() -> cattrs.Converter:
    """Build the converter for every wire type (one per server; cheap to build for tests)."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(str, _strict(str, "a string"))
    converter.register_structure_hook(int, _strict(int, "an integer"))
    converter.register_structure_hook(bool, _strict(bool, "a boolean"))
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook(SessionId, _structure_session_id)
    converter.register_unstructure_hook(datetime, timestamp)
    converter.register_structure_hook_func(
        lambda t: t in (MsgToken, MsgToken | None), _structure_token
    )
    converter.register_structure_hook_func(lambda t: t == tuple[str, ...], _structure_strings)
    converter.register_structure_hook_func(lambda t: t == dict[str, str], _structure_string_map)
    converter.register_structure_hook_func(lambda t: t == dict[str, Any], _structure_object)
    converter.register_structure_hook_func(
        lambda t: t == tuple[SpawnItem, ...], _items_hook(converter)
    )
    converter.register_structure_hook_func(
        lambda t: t == tuple[WorkflowStep, ...], _steps_hook(converter)
    )

    def structure_factory(cls: type[Any]) -> Any:
        overrides: dict[str, Any] = {
            a.name: override(rename=camel_case(a.name)) for a in attrs.fields(cls)
        }
        return make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **overrides)

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
    # client sees is exactly what was fingerprinted (planning/views.py).
    converter.register_unstructure_hook_func(lambda t: t in VIEWS, to_json)
    return converter


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
