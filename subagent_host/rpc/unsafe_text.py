"""The one rule every string in params obeys: no NUL, no unpaired surrogate.

JSON can carry both (`"\\u0000"`, `"\\ud800"`), but neither survives where our
strings go: SQLite stores text as UTF-8, which has no lone surrogates, and
`exec` takes C strings, which end at the first NUL. A request carrying either,
anywhere in its params (values, object keys, array items, free-form objects
such as resume `overrides`), is refused as invalid params before anything is
planned or started, with every place listed. Where such text is quoted back (a
path, an unknown method's name in an error message), it is escaped.
"""

from __future__ import annotations

import re
from typing import Any, Final

from subagent_host.rpc.param_problems import ParamProblem

_UNSAFE: Final = re.compile("[\x00\ud800-\udfff]")


def unsafe_text_problems(params: Any) -> list[ParamProblem]:
    """Every string in `params` that holds a NUL or a lone surrogate, with its camelCase path.

    Keys on the wire are camelCase already, so paths read like the other -32602
    paths (`tasks[1].label`, `env.FOO`). Iterative: params may nest deeply.
    """
    problems: list[ParamProblem] = []
    # (path, the key that leads there or None, value); pushed in reverse, so
    # popped in document order.
    pending: list[tuple[str, str | None, Any]] = [("", None, params)]
    while pending:
        path, key, value = pending.pop()
        if key is not None and (why := _why_unsafe(key)) is not None:
            problems.append(ParamProblem(path, f"the name {why}"))
        if isinstance(value, str):
            if (why := _why_unsafe(value)) is not None:
                problems.append(ParamProblem(path, f"the value {why}"))
        elif isinstance(value, dict):
            pending += [
                (f"{path}.{escape_unsafe(k)}" if path else escape_unsafe(k), k, item)
                for k, item in reversed(value.items())
            ]
        elif isinstance(value, list):
            pending += [
                (f"{path}[{i}]", None, item) for i, item in reversed(list(enumerate(value)))
            ]
    return problems


def _why_unsafe(text: str) -> str | None:
    found = _UNSAFE.search(text)
    if found is None:
        return None
    char = found.group()
    if char == "\x00":
        return "contains U+0000 (NUL), which no string passed to a process can hold"
    return f"contains an unpaired surrogate (U+{ord(char):04X}), which cannot be stored as UTF-8"


def escape_unsafe(text: str) -> str:
    """`text` as a path or an error message shows it: its NULs and lone surrogates
    written out as the six characters of a \\u escape (`\\ud800`).

    What is left is valid UTF-8, so the reply is JSON every parser takes: a lone
    surrogate could only be sent as a `\\ud800` escape, which strict parsers refuse.
    """
    return _UNSAFE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
