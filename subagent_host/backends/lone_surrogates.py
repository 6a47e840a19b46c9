"""Text from children made storable: each unpaired surrogate becomes U+FFFD.

An agent CLI's JSON events may carry `"\\ud800"` escapes, which decode to a
lone surrogate: Python holds it, but UTF-8 (SQLite, the wire) cannot. Text
that comes from a child is mended where it enters (`JsonLines`), so a final
text, an activity line, an error message or a session id never carries one
into the store or a reply. The run history mends again as a last defence.
"""

from __future__ import annotations

import re
from typing import Any, Final

LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
REPLACEMENT: Final = "\ufffd"
# A `\uD800`..`\uDFFF` escape in JSON text: only a line that has one can decode
# to a lone surrogate (raw surrogate bytes are not UTF-8 and never decode).
SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")


def mend(text: str) -> str:
    """`text` with each unpaired surrogate replaced by U+FFFD (JSON pairs them on decoding)."""
    return LONE_SURROGATE.sub(REPLACEMENT, text)


def mend_tree(value: Any) -> Any:
    """A decoded JSON value with every string (keys too) mended; containers are changed in place.

    Iterative: a child's JSON may nest as deeply as the parser allows.
    """
    if isinstance(value, str):
        return mend(value)
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            items = list(node.items())
            node.clear()
            for key, item in items:
                node[mend(key)] = mend(item) if isinstance(item, str) else item
                if isinstance(item, dict | list):
                    pending.append(item)
        elif isinstance(node, list):
            for index, item in enumerate(node):
                if isinstance(item, str):
                    node[index] = mend(item)
                elif isinstance(item, dict | list):
                    pending.append(item)
    return value
