"""What every part of the harness speaks of: the framings, and a mismatch between what the
protocol allows and what a server did, told in short excerpts.

Apart from the registry of cases (registry.py), so that the connection and the trial a
case runs in need not import the registry that names them.
"""

from __future__ import annotations

from typing import Any, Final, Literal

FramingName = Literal["ndjson", "lsp"]
FRAMINGS: Final[tuple[FramingName, ...]] = ("ndjson", "lsp")


class Mismatch(Exception):
    """A case saw something the protocol does not allow: what it expected, what it saw."""

    def __init__(self, expected: str, seen: str) -> None:
        super().__init__(f"expected {expected}; seen {seen}")
        self.expected = expected
        self.seen = seen


def short(value: Any, limit: int = 300) -> str:
    """A value as a one-line excerpt for a failure message."""
    import json

    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
