"""What a failed call raises: one `HostError` subclass per JSON-RPC error code the server uses.

The codes are the server's own, read from the one table of them
(`subagent_host/errors.py`: JSON-RPC's codes, and each domain error class's
`CODE`), never repeated here. This client keeps classes of its own (they hold
the JSON `data` as sent, and load none of the server); `ERRORS`, each code and
its class, is made of the classes below, and must name every code the server's
`MEANINGS` does (checked at import). A code this client does not know (a newer
server's) is raised as `HostError` itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from subagent_host import errors as domain
from subagent_host.rpc import codes


class HostError(Exception):
    """A request the server answered with an error (protocol.md §4).

    `code` is the JSON-RPC code, `message` the server's sentence for a person,
    `data` what a program needs (the JSON value as sent, or None without one).
    """

    CODE: ClassVar[int | None] = None

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data


class HostConnectionError(ConnectionError):
    """The connection to the server is gone or cannot be trusted: every waiting call and
    event stream raises it (the server exited, closed its output, or sent bytes that are
    not a message)."""


class ParseError(HostError):
    """The server could not read what was sent as JSON (-32700)."""

    CODE = codes.PARSE_ERROR


class InvalidRequest(HostError):
    """Not a valid request, an id still in flight, or a message too large (-32600)."""

    CODE = codes.INVALID_REQUEST


class MethodNotFound(HostError):
    """The server does not answer this method (-32601)."""

    CODE = codes.METHOD_NOT_FOUND


class InvalidParams(HostError):
    """Params that do not fit the method (-32602): `data["errors"]` lists `{path, message}`."""

    CODE = codes.INVALID_PARAMS


class InternalError(HostError):
    """The server failed (-32603); for a run it could not record, `data["runId"]`."""

    CODE = codes.INTERNAL_ERROR


class RequestCancelled(HostError):
    """The request was cancelled (-32800): by the server's own shutdown, or by a
    `$/cancelRequest` another client sent (this client's own cancellation raises
    `asyncio.CancelledError` instead). A cancelled `task`-mode spawn's `data` is the
    run's final snapshot, as sent."""

    CODE = codes.REQUEST_CANCELLED


class RunNotFound(HostError):
    """No run with that id in this session (-32001)."""

    CODE = domain.RunNotFound.CODE


class BackendUnavailable(HostError):
    """The backend cannot run here (-32002)."""

    CODE = domain.BackendUnavailable.CODE


class LaunchRejected(HostError):
    """The launch was rejected (-32003): `data["diagnostics"]` says why."""

    CODE = domain.LaunchRejected.CODE


class RequestRefused(LaunchRejected):
    """A request about a running run that its state refuses, with the same code (-32003):
    `data["reason"]` says why (`not-interactive`, `not-running`, `not-pending`)."""


class ResumeDenied(HostError):
    """The resume token was refused (-32004): `data["reason"]` says why."""

    CODE = domain.ResumeDenied.CODE


class CapacityExceeded(HostError):
    """The run queue is full (-32005)."""

    CODE = domain.CapacityExceeded.CODE


class AmbiguousRunId(HostError):
    """A run id prefix matches more than one run (-32006): `data["matches"]`."""

    CODE = domain.AmbiguousRunId.CODE


def _table() -> Mapping[int, type[HostError]]:
    table: dict[int, type[HostError]] = {}
    for kind in HostError.__subclasses__():
        assert kind.CODE is not None and kind.CODE not in table, kind
        table[kind.CODE] = kind
    missing = set(codes.MEANINGS) - set(table)
    assert not missing, f"no client class for codes {sorted(missing)}"
    return table


ERRORS: Final = _table()
"""Each code the server uses, and the class raised for it."""


def error_from(error: Any) -> HostError:
    """The exception for a response's `error` member (`{code, message, data?}`)."""
    if not isinstance(error, dict) or type(error.get("code")) is not int:
        return InternalError(codes.INTERNAL_ERROR, f"malformed error from the server: {error!r}")
    code: int = error["code"]
    message = error.get("message")
    kind = ERRORS.get(code, HostError)
    data = error.get("data")
    if kind is LaunchRejected and isinstance(data, dict) and "reason" in data:
        kind = RequestRefused  # the code's other use: a run's state refused the request
    return kind(code, message if isinstance(message, str) else "", data)
