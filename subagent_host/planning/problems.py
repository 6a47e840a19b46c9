"""The diagnostics a request's check gathers, and the error that rejects it.

Every problem of a request is found in one pass and reported at once; any error
among them rejects the launch (`-32003`, or `-32002` when the only problem is a
backend that is not available).
"""

from __future__ import annotations

from collections.abc import Sequence

from subagent_host.errors import BackendUnavailable, LaunchRejected
from subagent_host.values.error_data import Rejection
from subagent_host.values.facts import Diagnostic


class Problems:
    """Diagnostics gathered while a request is checked."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []

    def error(self, code: str, message: str, path: str | None = None) -> None:
        self.items.append(Diagnostic("error", code, message, path))

    def warning(self, code: str, message: str, path: str | None = None) -> None:
        self.items.append(Diagnostic("warning", code, message, path))

    def info(self, code: str, message: str, path: str | None = None) -> None:
        self.items.append(Diagnostic("info", code, message, path))

    @property
    def failed(self) -> bool:
        return any(d.severity == "error" for d in self.items)


def raise_if_rejected(diagnostics: Sequence[Diagnostic]) -> None:
    """LaunchRejected (-32003), or BackendUnavailable (-32002) when every error is a
    backend that is not available; nothing when no diagnostic is an error."""
    errors = [d for d in diagnostics if d.severity == "error"]
    if not errors:
        return
    data = Rejection(tuple(errors))
    if all(d.code == "backend-unavailable" for d in errors):
        raise BackendUnavailable(errors[0].message, data=data)
    summary = "; ".join(d.message for d in errors[:3])
    raise LaunchRejected(f"launch rejected: {summary}", data=data)
