"""One attrs value made from another: the fields their classes share, copied by name.

Where one class is another seen from elsewhere (a configuration's limits as the wire
reports them, a planned child as its projection records it), the fields both have
are the same value under the same name. Copying them here keeps such a pair in step:
a field added to both is carried over without a line at each place one is made.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

import attrs

T = TypeVar("T")


def shared(cls: type[T], source: object, /, **given: Any) -> T:
    """A `cls` from the fields of `source` that `cls` also has, by name; `given` supplies
    (or replaces) the others. Both are attrs instances' classes."""
    names = {field.name for field in attrs.fields(cast(Any, type(source)))} - given.keys()
    copied = {
        field.name: getattr(source, field.name)
        for field in attrs.fields(cast(Any, cls))
        if field.name in names and field.init
    }
    return cls(**copied, **given)
