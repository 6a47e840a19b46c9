"""Domain errors, each with its JSON-RPC code and meaning: the one table of them.

Handlers, runs and the store raise these without knowing about the wire; each
class names the code it is answered with (protocol.md §4) and what that code
means in a few words. `rpc/codes.py` derives the server's `CODES` and
`MEANINGS` from this module, the client library (`client/errors.py`) its
typed exceptions' codes, and the schema each method's `errors`. A new domain
error is one class here (and its client twin). This module imports nothing of
ours but the plain values its `data` is made of (`values/error_data.py`), so
every layer can raise these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final

# JSON-RPC's (and LSP's) own codes: answered by dispatch itself, or by a domain error below.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_CANCELLED: Final = -32800

# What each of them means, in a few words (the schema's error `message`s).
JSONRPC_MEANINGS: Final[Mapping[int, str]] = {
    PARSE_ERROR: "parse error",
    INVALID_REQUEST: "invalid request",
    METHOD_NOT_FOUND: "method not found",
    INVALID_PARAMS: "invalid params",
    INTERNAL_ERROR: "internal error",
    REQUEST_CANCELLED: "request cancelled",
}


class HostError(Exception):
    """Base class of every error a client may see with its own JSON-RPC code.

    `CODE` and `MEANING` are the class's code and its few words (protocol.md §4);
    `data` is what a program needs (a wire type of `values/error_data.py`, or a
    snapshot, which the dispatcher unstructures); `message` is a sentence for a person.
    """

    CODE: ClassVar[int] = INTERNAL_ERROR
    MEANING: ClassVar[str] = JSONRPC_MEANINGS[INTERNAL_ERROR]

    def __init__(self, message: str, *, data: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class RunNotFound(HostError):
    """No run has that id in this session (also: the run belongs to another session).
    `data`: a `RunRef`."""

    CODE = -32001
    MEANING = "run not found"


class BackendUnavailable(HostError):
    """The backend's executable cannot be found or does not answer its probe.
    `data`: a `Rejection`."""

    CODE = -32002
    MEANING = "backend unavailable"


class LaunchRejected(HostError):
    """Preflight rejected the launch, or the launch does not match its preflight.
    `data`: a `Rejection`."""

    CODE = -32003
    MEANING = "launch rejected"


class RequestRefused(LaunchRejected):
    """A request about a running run that its state refuses, answered with the code of
    a rejected launch (-32003): a live message, interrupt or close for a child that is
    not interactive or not running, an answer to a permission no longer pending.
    `data`: a `Refusal`."""


class ResumeDenied(HostError):
    """A resume token was unknown, expired, consumed, foreign or mismatched.
    `data`: a `ResumeDenial`."""

    CODE = -32004
    MEANING = "resume denied"


class CapacityExceeded(HostError):
    """The run queue is full. `data`: a `QueueFull`."""

    CODE = -32005
    MEANING = "capacity exceeded"


class AmbiguousRunId(HostError):
    """A run id prefix matches more than one run. `data`: a `RunIdMatches`."""

    CODE = -32006
    MEANING = "ambiguous run id"


class RequestCancelled(HostError):
    """The client cancelled the request; `data` may carry what it had done (a run's snapshot)."""

    CODE = REQUEST_CANCELLED
    MEANING = JSONRPC_MEANINGS[REQUEST_CANCELLED]


class RecordFailed(HostError):
    """A run could not be written to the run history: no success may be answered for it.
    The store failed, not the request: internal, but a known failure, said plainly.
    `data`: a `RunRef`."""

    CODE = INTERNAL_ERROR
    MEANING = JSONRPC_MEANINGS[INTERNAL_ERROR]


# Every domain error, in the order of protocol.md §4's table.
DOMAIN_ERRORS: Final[tuple[type[HostError], ...]] = (
    RequestCancelled,
    RecordFailed,
    RunNotFound,
    BackendUnavailable,
    LaunchRejected,
    ResumeDenied,
    CapacityExceeded,
    AmbiguousRunId,
)
