"""Workflow templates: `{task}`, `{previous}`, `{outputs.NAME}`, `{item}`, `{index}`.

A placeholder is a name in braces: `{` then a letter or `_`, then letters,
digits or `_`, optionally `.` and more of them, then `}`. Anything else in
braces (`{"a": 1}`, `{ x }`, `{}`) is literal text, so JSON in a prompt is left
alone. A placeholder the workflow cannot fill is an error found before anything
runs (`check`), never a silent empty string. Substitution is one pass: text put
in by a placeholder is not searched again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Final

from subagent_host.backends.lone_surrogates import mend_tree
from subagent_host.values.json_values import JsonValue

PLACEHOLDER: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\}")
OUTPUT_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
OUTPUTS_PREFIX: Final = "outputs."
TRUNCATED_MARKER: Final = "[previous output truncated]"


def placeholders(template: str) -> list[str]:
    """The placeholder names in `template`, in order (`outputs.plan`, `task`, ...)."""
    return PLACEHOLDER.findall(template)


def check(
    template: str,
    *,
    previous: bool,
    outputs: Collection[str],
    loop: bool,
) -> list[str]:
    """Why `template` cannot be filled here (empty when it can).

    `previous`: a step ran before this one. `outputs`: the output names earlier
    steps define. `loop`: inside a `forEach` item (`{item}`, `{index}`).
    """
    problems = []
    for name in placeholders(template):
        if name == "task":
            continue
        if name == "previous":
            if not previous:
                problems.append("{previous} has no earlier step to take its output from")
        elif name in ("item", "index"):
            if not loop:
                problems.append(f"{{{name}}} is only known inside a forEach item")
        elif name.startswith(OUTPUTS_PREFIX):
            output = name.removeprefix(OUTPUTS_PREFIX)
            if output not in outputs:
                known = ", ".join(sorted(outputs)) or "none yet"
                problems.append(
                    f"{{{name}}}: no earlier step names its output {output!r} (known: {known})"
                )
        else:
            problems.append(
                f"unknown placeholder {{{name}}} (use {{task}}, {{previous}}, "
                "{outputs.NAME}, {item} or {index})"
            )
    return problems


def render(template: str, values: Mapping[str, str]) -> str:
    """`template` with each placeholder replaced by its value (checked beforehand)."""

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        value = values.get(name)
        # `check` ran first; a name still unknown here is left as written.
        return value if value is not None else match.group(0)

    return PLACEHOLDER.sub(fill, template)


def cap(text: str, limit: int) -> str:
    """At most `limit` bytes of `text` (whole characters), then the truncation marker."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore") + "\n" + TRUNCATED_MARKER


def item_text(item: JsonValue) -> str:
    """How a forEach element reads in `{item}`: a string as it is, anything else as JSON."""
    return item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)


class NotAnArray(ValueError):
    """A forEach template did not yield a JSON array."""


def json_array(text: str) -> list[JsonValue]:
    """The JSON array `text` holds: the whole text, or the inside of one code fence.

    Agents often wrap JSON in a markdown fence (```json ... ```); that one
    wrapping is accepted, nothing looser: a wrong guess would fan out over the
    wrong list.
    """
    stripped = text.strip()
    candidates = [stripped]
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        candidates.append(stripped[stripped.index("\n") + 1 : -3].strip())
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, list):
            mend_tree(value)  # a child's "\ud800" never reaches a template
            return value
        raise NotAnArray(f"it yielded JSON {_json_kind(value)}, not an array")
    preview = stripped[:80] + ("..." if len(stripped) > 80 else "")
    raise NotAnArray(f"it did not yield JSON (it began {preview!r})")


def _json_kind(value: JsonValue) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "a number"
