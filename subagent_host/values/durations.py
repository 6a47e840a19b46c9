"""Durations as the wire tells them: from two moments cut to the millisecond.

Shared by the snapshots the server sends (`handlers/snapshots.py`) and what the
terminal prints from the store (`runs`), so both say the same `durationMs`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

MILLISECOND: Final = timedelta(milliseconds=1)


def duration_ms(start: datetime | None, end: datetime | None) -> int | None:
    """`endedAt - startedAt` exactly as the two timestamps read (whole milliseconds each).

    From the moments cut to the millisecond, as `timestamp` writes them: rounding the
    true difference instead could be 1 ms off what a client computes from the two.
    """
    if start is None or end is None:
        return None
    return (_to_ms(end) - _to_ms(start)) // MILLISECOND


def _to_ms(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)
