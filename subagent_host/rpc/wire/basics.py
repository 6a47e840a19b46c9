"""The wire's own primitive values, and the error a value of the wrong form raises.

Imported by every other module of the wire (its types and its converter), so it
imports none of them.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, Final, NewType


class WireValueError(ValueError):
    """A value has the wrong type or form; its message is shown to the client as is."""


# A run's few moments are written again for every snapshot of it.
@functools.lru_cache(maxsize=1024)
def timestamp(moment: datetime) -> str:
    """ISO 8601 UTC with milliseconds: `2026-11-30T02:40:00.123Z` (moments are UTC)."""
    # isoformat, not strftime: the C library's strftime re-reads the time zone each
    # call. Its first 23 characters are `YYYY-MM-DDTHH:MM:SS.mmm`.
    return moment.isoformat(timespec="milliseconds")[:23] + "Z"


# Formats are checked by structure hooks of these types, not by attrs validators:
# cattrs reports hook failures for every field at once, validators only after.
SessionId = NewType("SessionId", str)


# A request id's form, and a `workDoneToken`'s.
MsgToken = int | str


# Marks a field whose value's keys are written in its place, not under its name.
INLINE: Final = "inline"


def json_type_name(value: Any) -> str:
    """How a client would name the JSON type of `value`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
