"""A typed asyncio client of subagent-host: `Host`, its errors, and the wire types it speaks.

```python
from subagent_host.client import Host

async with Host.start(["--state-dir", state_dir]) as host:
    info = await host.initialize()  # optional: the server's full report
    snap = await host.spawn(command=["echo", "hi"], mode="task")
    print(snap.status, snap.children[0].output.text)
    run = await host.spawn(prompt="review", backend="pi")  # background: answered at once
    async for event in host.events(run.run_id):  # ends when the run is terminal
        ...
    final = await host.wait(run.run_id)
    # An interactive child lives on after its turn and takes messages (protocol.md §23).
    chat = await host.spawn(command=["cat"], prompt="hello", interactive=True)
    await host.send(chat.run_id, "again")  # `delivered`, or `queued` behind a running turn
    await host.close_run(chat.run_id)  # its input ends; answered with its final snapshot
```

With `approvals="client"` (claude, codex) its tool uses wait for an answer:
`host.permit(run_id, permission_id, option_id)`, or
`host.answer_permissions(run_id, decide)` calling `decide(permission)` for each one
asked until the run ends (`decide` returns an option, the kind of one such as
`OptionKind.ALLOW_ONCE`, an option id, or None to leave it).

Results are the server's own wire types (`subagent_host.rpc.wire`,
`subagent_host.values.facts`) with snake_case attributes; a snapshot's
`startedAt`, `endedAt`, `durationMs`, `output`, `error` and `reason` are its
`outcome`'s, readable as its own attributes too (`snap.output`). An event
(`EventWire`) carries its `run_id`, `seq`, `at` and `type`, and under `event`
one of the event classes (`values/events.py`, re-exported here) with that
type's own fields. A field with a fixed set of values is read as its enumeration's
member (`snap.status is RunStatus.COMPLETED`; a member equals its string too, and the
enumerations a client most compares against are re-exported here). See `Host` for
every method and protocol.md for what they mean.
"""

from subagent_host.client.errors import (
    ERRORS,
    AmbiguousRunId,
    BackendUnavailable,
    CapacityExceeded,
    HostConnectionError,
    HostError,
    InternalError,
    InvalidParams,
    InvalidRequest,
    LaunchRejected,
    MethodNotFound,
    ParseError,
    RequestCancelled,
    RequestRefused,
    ResumeDenied,
    RunNotFound,
)
from subagent_host.client.host import Call, Host
from subagent_host.client.permissions import Choice, Decide
from subagent_host.rpc.wire import (
    AccessRequest,
    AgentsListResult,
    ClientInfo,
    EventWire,
    ForEachStep,
    InitializeResult,
    InterruptResult,
    ParallelStep,
    PermitResult,
    PingResult,
    PreflightResult,
    ResumeRequest,
    RunList,
    RunSnapshot,
    SendResult,
    SpawnItem,
    WorkflowRequest,
)
from subagent_host.values import TERMINAL, Mode, RunKind, RunStatus
from subagent_host.values.choices import (
    Delivery,
    DeliveryState,
    OptionKind,
    PermissionStage,
    PlanPriority,
    PlanStatus,
    ReachedLimit,
    StepStatus,
    StoppedBy,
    ToolKind,
    TurnState,
)
from subagent_host.values.events import (
    ActivityEvent,
    ChildEvent,
    Event,
    InputEvent,
    MessageEvent,
    OutputEvent,
    PermissionEvent,
    PlanEntry,
    PlanEvent,
    StatusEvent,
    StderrEvent,
    ToolEvent,
    TurnEvent,
    UsageEvent,
)
from subagent_host.values.interaction import PendingPermission, PermissionOption, TurnInfo

__all__ = [
    "AccessRequest",
    "ActivityEvent",
    "AgentsListResult",
    "AmbiguousRunId",
    "BackendUnavailable",
    "Call",
    "CapacityExceeded",
    "ChildEvent",
    "Choice",
    "ClientInfo",
    "Decide",
    "Delivery",
    "DeliveryState",
    "ERRORS",
    "Event",
    "EventWire",
    "ForEachStep",
    "Host",
    "HostConnectionError",
    "HostError",
    "InitializeResult",
    "InputEvent",
    "InternalError",
    "InterruptResult",
    "InvalidParams",
    "InvalidRequest",
    "LaunchRejected",
    "MessageEvent",
    "MethodNotFound",
    "Mode",
    "OptionKind",
    "OutputEvent",
    "ParallelStep",
    "ParseError",
    "PendingPermission",
    "PermissionEvent",
    "PermissionOption",
    "PermissionStage",
    "PermitResult",
    "PingResult",
    "PlanEntry",
    "PlanEvent",
    "PlanPriority",
    "PlanStatus",
    "PreflightResult",
    "ReachedLimit",
    "RequestCancelled",
    "RequestRefused",
    "ResumeDenied",
    "ResumeRequest",
    "RunKind",
    "RunList",
    "RunNotFound",
    "RunSnapshot",
    "RunStatus",
    "SendResult",
    "SpawnItem",
    "StatusEvent",
    "StderrEvent",
    "StepStatus",
    "StoppedBy",
    "TERMINAL",
    "ToolEvent",
    "ToolKind",
    "TurnEvent",
    "TurnInfo",
    "TurnState",
    "UsageEvent",
    "WorkflowRequest",
]
