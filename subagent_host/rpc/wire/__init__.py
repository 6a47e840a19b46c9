"""Every type that crosses the wire, and the one cattrs converter that reads and writes them.

One module per job, every name re-exported here (`from subagent_host.rpc.wire import
...` is how the rest of the code reaches them):

- `basics`: the wire's primitive values (`SessionId`, `MsgToken`, moments as
  `timestamp` writes them) and `WireValueError`;
- `meta`: `_meta`, which every method's params may carry;
- `handshake`: `ping`, `initialize` and LSP's other lifecycle messages;
- `launch`: `spawn`, `preflight` and `resume`;
- `events`: `EventWire`, one event of a run, and how it is read and written;
- `snapshots`: a run's snapshot (`status`, `stop`), the list of runs;
- `agents`: `agents/list`;
- `control`: `stop`, `run/detach`, `window/workDoneProgress/cancel`, and `run/send`,
  `run/interrupt`, `run/close`, `run/permit`;
- `converter`: `make_converter` and its hooks.

What runs report (usage, output, error, resources, diagnostics, summaries) is not
copied into twins here: those types (`values/facts.py`) are sent as they are. The
launch request's types are planning's (they import nothing of ours): listed here so
that every type on the wire can still be found through this package.
"""

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
from subagent_host.rpc.wire.agents import (
    AgentDisabledInfo,
    AgentInfo,
    AgentsListParams,
    AgentsListResult,
)
from subagent_host.rpc.wire.basics import (
    INLINE,
    MsgToken,
    SessionId,
    WireValueError,
    json_type_name,
    timestamp,
)
from subagent_host.rpc.wire.control import (
    CloseParams,
    DetachParams,
    InterruptParams,
    InterruptResult,
    PermitParams,
    PermitResult,
    SendParams,
    SendResult,
    StopParams,
    WorkDoneProgressCancelParams,
)
from subagent_host.rpc.wire.converter import make_converter, view_json, without_nulls
from subagent_host.rpc.wire.events import EventWire
from subagent_host.rpc.wire.handshake import (
    TRACE_VALUES,
    Admission,
    ClientInfo,
    Features,
    InitializedParams,
    InitializeParams,
    InitializeResult,
    Limits,
    NoParams,
    NotificationCapabilities,
    PingParams,
    PingResult,
    ServerCapabilities,
    ServerInfo,
    WorkspaceFolder,
)
from subagent_host.rpc.wire.launch import (
    PreflightParams,
    PreflightResult,
    ResumeParams,
    ResumeRequest,
    SpawnParams,
)
from subagent_host.rpc.wire.meta import META, META_SCHEMA, without_meta
from subagent_host.rpc.wire.snapshots import (
    BackgroundMember,
    ChildSnapshot,
    OutcomeField,
    OutcomeFields,
    RunList,
    RunOutcome,
    RunSnapshot,
    StatusParams,
    StatusResult,
    StepSnapshot,
    WorkflowSnapshot,
)
from subagent_host.values import camel_case
from subagent_host.values.placement import Placement

__all__ = [
    "AccessRequest",
    "Admission",
    "AgentDisabledInfo",
    "AgentInfo",
    "AgentsListParams",
    "AgentsListResult",
    "BackgroundMember",
    "ChildSnapshot",
    "ClientInfo",
    "CloseParams",
    "DetachParams",
    "EventWire",
    "Features",
    "ForEachStep",
    "INLINE",
    "InitializeParams",
    "InitializeResult",
    "InitializedParams",
    "InterruptParams",
    "InterruptResult",
    "ItemFields",
    "LaunchRequest",
    "Limits",
    "META",
    "META_SCHEMA",
    "MsgToken",
    "NoParams",
    "NotificationCapabilities",
    "OutcomeField",
    "OutcomeFields",
    "ParallelStep",
    "PermitParams",
    "PermitResult",
    "PingParams",
    "PingResult",
    "Placement",
    "PreflightParams",
    "PreflightResult",
    "ResumeParams",
    "ResumeRequest",
    "RunList",
    "RunOutcome",
    "RunSnapshot",
    "SendParams",
    "SendResult",
    "ServerCapabilities",
    "ServerInfo",
    "SessionId",
    "SpawnItem",
    "SpawnParams",
    "StatusParams",
    "StatusResult",
    "StepSnapshot",
    "StopParams",
    "TRACE_VALUES",
    "WireValueError",
    "WorkDoneProgressCancelParams",
    "WorkflowRequest",
    "WorkflowSnapshot",
    "WorkflowStep",
    "WorkspaceFolder",
    "camel_case",
    "json_type_name",
    "make_converter",
    "timestamp",
    "view_json",
    "without_meta",
    "without_nulls",
]
