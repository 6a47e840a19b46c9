"""How a message counts things: `1 run`, `2 runs`.

Here, not with the terminal's words (`terminal/views.py` re-exports it), because the
server's own errors and logs count things too and never load the terminal code.
"""

from __future__ import annotations


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 run`, `2 runs`, `0 children` (with `nouns` for an irregular plural)."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"


def between(low: int, high: int, noun: str, nouns: str | None = None) -> str:
    """`1 to 8 items`, or `1 item` when the range holds one number."""
    if low == high:
        return plural(low, noun, nouns)
    return f"{low} to {plural(high, noun, nouns)}"
