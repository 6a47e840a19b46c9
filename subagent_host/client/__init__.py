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
```

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
from subagent_host.rpc.wire import (
    AccessRequest,
    AgentsListResult,
    ClientInfo,
    EventWire,
    ForEachStep,
    InitializeResult,
    ParallelStep,
    PingResult,
    PreflightResult,
    ResumeRequest,
    RunList,
    RunSnapshot,
    SpawnItem,
    WorkflowRequest,
)
from subagent_host.values import TERMINAL, Mode, RunKind, RunStatus
from subagent_host.values.choices import ReachedLimit, StepStatus, StoppedBy
from subagent_host.values.events import (
    ActivityEvent,
    ChildEvent,
    Event,
    MessageEvent,
    OutputEvent,
    StatusEvent,
    StderrEvent,
    ToolEvent,
    UsageEvent,
)

__all__ = [
    "ERRORS",
    "AccessRequest",
    "ActivityEvent",
    "AgentsListResult",
    "AmbiguousRunId",
    "ClientInfo",
    "BackendUnavailable",
    "Call",
    "CapacityExceeded",
    "ChildEvent",
    "Event",
    "EventWire",
    "ForEachStep",
    "Host",
    "HostConnectionError",
    "HostError",
    "InitializeResult",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "LaunchRejected",
    "RequestRefused",
    "MessageEvent",
    "MethodNotFound",
    "Mode",
    "OutputEvent",
    "ParallelStep",
    "ParseError",
    "ReachedLimit",
    "PingResult",
    "PreflightResult",
    "RequestCancelled",
    "ResumeDenied",
    "ResumeRequest",
    "RunKind",
    "RunList",
    "RunNotFound",
    "RunSnapshot",
    "RunStatus",
    "SpawnItem",
    "StatusEvent",
    "StderrEvent",
    "StepStatus",
    "StoppedBy",
    "TERMINAL",
    "ToolEvent",
    "UsageEvent",
    "WorkflowRequest",
]
