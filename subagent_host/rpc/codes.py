"""The JSON-RPC error codes (protocol.md §4): the one table of them.

`CODES` maps each domain error (`subagent_host.errors`) to its code; `MEANINGS`
says in a few words what each code means. Plain values only: no pygls, no
lsprotocol, so the client library (`client/errors.py`) reads the very same
table as the server's error mapping (`rpc/errors.py`) without loading the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from subagent_host.errors import (
    AmbiguousRunId,
    BackendUnavailable,
    CapacityExceeded,
    HostError,
    LaunchRejected,
    RecordFailed,
    RequestCancelled,
    ResumeDenied,
    RunNotFound,
)

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_CANCELLED: Final = -32800

CODES: Final[Mapping[type[HostError], int]] = {
    RunNotFound: -32001,
    BackendUnavailable: -32002,
    LaunchRejected: -32003,
    ResumeDenied: -32004,
    CapacityExceeded: -32005,
    AmbiguousRunId: -32006,
    RequestCancelled: REQUEST_CANCELLED,
    # The store failed, not the request: internal, but a known failure, said plainly.
    RecordFailed: INTERNAL_ERROR,
}

# What each code means, in a few words (protocol.md §4; the schema's error `message`s).
MEANINGS: Final[Mapping[int, str]] = {
    PARSE_ERROR: "parse error",
    INVALID_REQUEST: "invalid request",
    METHOD_NOT_FOUND: "method not found",
    INVALID_PARAMS: "invalid params",
    INTERNAL_ERROR: "internal error",
    REQUEST_CANCELLED: "request cancelled",
    CODES[RunNotFound]: "run not found",
    CODES[BackendUnavailable]: "backend unavailable",
    CODES[LaunchRejected]: "launch rejected",
    CODES[ResumeDenied]: "resume denied",
    CODES[CapacityExceeded]: "capacity exceeded",
    CODES[AmbiguousRunId]: "ambiguous run id",
}
