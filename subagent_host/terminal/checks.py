"""One line of `subagent-host doctor`'s report (protocol.md §7.6)."""

from __future__ import annotations

import attrs


@attrs.frozen
class Check:
    """One line of the report."""

    name: str
    passed: bool | None
    """True passed, False failed (exit 1), None a warning that does not fail."""
    detail: str
    fix: str | None = None
