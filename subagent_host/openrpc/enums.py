"""The fields whose values come from a fixed set the code names, and that set.

Wire fields are plain strings in Python (the run book, the store and the wire
share them); their allowed values live in the constants and enums of the
layers that produce them. This table ties each field to those constants, so
the schema's `enum`s change when the code does. A field is named by the class
that declares it; subclasses (`SpawnParams` of `ItemFields`) inherit its enum.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from subagent_host.agents.definitions import ERROR, INFO, SOURCES, WARNING
from subagent_host.backends.base import EFFECTS, MAX_TURNS_LIMIT
from subagent_host.backends.budgets import MAX_COST_LIMIT, MAX_TOKENS_LIMIT
from subagent_host.backends.exits import StoppedBy
from subagent_host.backends.sessions import SEALED_AT_END, SEALED_AT_RECOVERY
from subagent_host.backends.tracking import TrackingMode
from subagent_host.planning.access import FILESYSTEM_LEVELS
from subagent_host.planning.egress import EGRESS_KINDS
from subagent_host.planning.receipts import BEST_EFFORT, EXECUTION_BOUNDARY, HOST_HARD
from subagent_host.planning.request import AccessRequest, ItemFields, LaunchRequest
from subagent_host.planning.views import (
    Access,
    AccessReceipt,
    AgentRef,
    ChildReceipt,
    Contract,
    Egress,
    LimitReceipt,
    NormalizedPlan,
    PlanChild,
    PlanStep,
    Projection,
    RemovedTool,
    ToolEffects,
)
from subagent_host.rpc.wire import (
    TRACE_VALUES,
    AgentDisabledInfo,
    AgentInfo,
    ChildSnapshot,
    InitializeParams,
    PingResult,
    ResumeParams,
    RunSnapshot,
    StepSnapshot,
)
from subagent_host.runs.state import (
    ADMITTED_DIRECT,
    ADMITTED_PREFLIGHT,
    STEP_PENDING,
    STEP_RUNNING,
    RunStatus,
)
from subagent_host.settings.agent_filter import DISABLED, ENABLED
from subagent_host.settings.model import AGENT_BACKENDS, BACKENDS
from subagent_host.store.database import PERSISTENCE_MEMORY, PERSISTENCE_SQLITE
from subagent_host.values import (
    ISOLATIONS,
    MODES,
    SESSION_RESOURCES,
    STEP_COMMAND,
    STEP_FOR_EACH,
    STEP_PARALLEL,
    STEP_PROMPT,
    RunKind,
)
from subagent_host.values.facts import BackendInfo, Diagnostic, RunSummary

STATUSES: Final = tuple(str(status) for status in RunStatus)
KINDS: Final = tuple(str(kind) for kind in RunKind)
STEP_KINDS: Final = (STEP_PROMPT, STEP_PARALLEL, STEP_FOR_EACH)
# A run's step reports a prompt step that runs a command as `command`; a plan does not.
REPORTED_STEP_KINDS: Final = (STEP_PROMPT, STEP_COMMAND, STEP_PARALLEL, STEP_FOR_EACH)

ENUMS: Final[Mapping[tuple[type[Any], str], tuple[str, ...]]] = {
    # Runs, children, steps and their events.
    (RunSnapshot, "status"): STATUSES,
    (ChildSnapshot, "status"): STATUSES,
    (RunSummary, "status"): STATUSES,
    (StepSnapshot, "status"): (STEP_PENDING, STEP_RUNNING, *STATUSES[2:]),
    (RunSnapshot, "kind"): KINDS,
    (RunSummary, "kind"): KINDS,
    (NormalizedPlan, "kind"): KINDS,
    (StepSnapshot, "kind"): REPORTED_STEP_KINDS,
    (PlanStep, "kind"): STEP_KINDS,
    (RunSnapshot, "admitted_by"): (ADMITTED_PREFLIGHT, ADMITTED_DIRECT),
    (RunSnapshot, "reached_limit"): (MAX_TURNS_LIMIT, MAX_TOKENS_LIMIT, MAX_COST_LIMIT),
    (ChildSnapshot, "stopped_by"): tuple(str(way) for way in StoppedBy),
    # Backends.
    (ItemFields, "backend"): BACKENDS,
    (ChildSnapshot, "backend"): BACKENDS,
    (BackendInfo, "id"): BACKENDS,
    (PlanChild, "backend"): BACKENDS,
    (ChildReceipt, "backend"): BACKENDS,
    (Egress, "kind"): EGRESS_KINDS,
    (Egress, "backend"): AGENT_BACKENDS,
    (Projection, "backend"): BACKENDS,
    # Modes, resources, access.
    (LaunchRequest, "mode"): MODES,
    (ResumeParams, "mode"): MODES,
    (AgentInfo, "mode"): MODES,
    (ItemFields, "session_resources"): SESSION_RESOURCES,
    (PlanChild, "session_resources"): SESSION_RESOURCES,
    (ChildReceipt, "session_resources"): SESSION_RESOURCES,
    (Projection, "session_resources"): SESSION_RESOURCES,
    (ItemFields, "isolation"): ISOLATIONS,
    (PlanChild, "isolation"): ISOLATIONS,
    (ChildReceipt, "isolation"): ISOLATIONS,
    (Projection, "isolation"): ISOLATIONS,
    (AccessRequest, "filesystem"): FILESYSTEM_LEVELS,
    (Access, "filesystem"): FILESYSTEM_LEVELS,
    (ToolEffects, "effects"): EFFECTS,
    (ChildReceipt, "effects"): EFFECTS,
    (RemovedTool, "exceeds"): EFFECTS,
    (LimitReceipt, "enforcement"): (HOST_HARD, BEST_EFFORT),
    (AccessReceipt, "execution_boundary"): (EXECUTION_BOUNDARY,),
    (Contract, "session_digest_source"): (SEALED_AT_END, SEALED_AT_RECOVERY),
    # Findings, definitions, the server.
    (Diagnostic, "severity"): (ERROR, WARNING, INFO),
    (AgentInfo, "source"): SOURCES,
    (AgentRef, "source"): SOURCES,
    (AgentDisabledInfo, "by"): (ENABLED, DISABLED),
    (PingResult, "process_tracking"): tuple(mode.value for mode in TrackingMode),
    (PingResult, "persistence"): (PERSISTENCE_SQLITE, PERSISTENCE_MEMORY),
    (InitializeParams, "trace"): TRACE_VALUES,
}


def enum_of(cls: type[Any], name: str) -> tuple[str, ...] | None:
    """The fixed values of field `name` of `cls` (or of the base class declaring it)."""
    for owner in cls.__mro__:
        values = ENUMS.get((owner, name))
        if values is not None:
            return values
    return None
