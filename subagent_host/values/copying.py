"""One attrs value made from another: the fields their classes share, copied by name.

Where one class is another seen from elsewhere (a configuration's limits as the wire
reports them, a planned child as its projection records it), the fields both have
are the same value under the same name. Copying them here keeps such a pair in step:
a field added to both is carried over without a line at each place one is made
(`tests/test_shared_fields.py` checks that each such field has one type on both sides).
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar, cast

import attrs

T = TypeVar("T")


def shared(cls: type[T], source: object, /, **given: Any) -> T:
    """A `cls` from the fields of `source` that `cls` also has, by name; `given` supplies
    (or replaces) the others. Both are attrs instances' classes."""
    names = _copied(cast(Any, type(source)), cast(Any, cls), frozenset(given))
    return cls(**{name: getattr(source, name) for name in names}, **given)


@functools.cache
def _copied(source: type, cls: type, given: frozenset[str]) -> tuple[str, ...]:
    """The names copied from a `source` to a `cls` (once per pair: snapshots are made
    for every child at every reply)."""
    names = {field.name for field in attrs.fields(cast(Any, source))} - given
    return tuple(
        field.name for field in attrs.fields(cast(Any, cls)) if field.init and field.name in names
    )
