"""Domain errors: raised by handlers and runs, mapped to JSON-RPC codes in one place.

The codes live in `rpc/codes.py` (protocol.md §4); this module imports nothing of
ours so every layer can raise these without knowing about the wire.
"""

from __future__ import annotations


class HostError(Exception):
    """Base class of every error a client may see with its own JSON-RPC code.

    `data` is what a program needs (a mapping, or a wire type the dispatcher
    unstructures); `message` is a sentence for a person.
    """

    def __init__(self, message: str, *, data: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class RunNotFound(HostError):
    """No run has that id in this session (also: the run belongs to another session)."""


class BackendUnavailable(HostError):
    """The backend's executable cannot be found or does not answer its probe."""


class LaunchRejected(HostError):
    """Preflight rejected the launch, or the launch does not match its preflight."""


class ResumeDenied(HostError):
    """A resume token was unknown, expired, consumed, foreign or mismatched."""


class CapacityExceeded(HostError):
    """The run queue is full."""


class AmbiguousRunId(HostError):
    """A run id prefix matches more than one run."""


class RequestCancelled(HostError):
    """The client cancelled the request; `data` may carry what it had done (a run's snapshot)."""


class RecordFailed(HostError):
    """A run could not be written to the run history: no success may be answered for it."""
