"""Shape what a run reports as output: capped texts, parallel summaries, `{previous}`.

The caps are protocol.md §12's: one child's text, each child's share of a parallel
summary, and what a chain passes on as `{previous}`.
"""

from __future__ import annotations

from typing import Final

import attrs

from subagent_host.backends.base import ParsedOutcome
from subagent_host.backends.output import TRUNCATION_MARKER, cap_text
from subagent_host.runs.state import Run
from subagent_host.values.facts import OutputInfo

PREVIOUS_PLACEHOLDER: Final = "{previous}"


@attrs.frozen
class OutputCaps:
    """protocol.md §12 caps: one child's text, and each child's inside a parallel summary."""

    bytes: int
    lines: int
    parallel_bytes: int
    parallel_lines: int
    previous_bytes: int


def child_output(
    caps: OutputCaps, outcome: ParsedOutcome, *, parallel: bool, partial: bool
) -> OutputInfo:
    """One child's output, capped as a whole output or as its share of a parallel summary."""
    cap_bytes = caps.parallel_bytes if parallel else caps.bytes
    cap_lines = caps.parallel_lines if parallel else caps.lines
    capped = cap_text(outcome.final_text, cap_bytes, cap_lines)
    truncated = capped.truncated or outcome.final_bytes > len(outcome.final_text.encode())
    text = capped.text
    if truncated and not capped.truncated:
        text = text + ("" if text.endswith("\n") or not text else "\n") + TRUNCATION_MARKER
    return OutputInfo(
        text=text,
        truncated=truncated,
        bytes=outcome.final_bytes,
        lines=outcome.final_lines,
        partial=partial,
        stderr_tail=outcome.stderr_tail,
    )


def parallel_summary(run: Run, *, partial: bool) -> OutputInfo:
    """A parallel run's output: each child's title, status and (already capped) text."""
    parts = []
    for child in run.children:
        title = f"[{child.index}]" + (f" {child.label}" if child.label else "")
        body = child.output.text if child.output else ""
        parts.append(f"{title} {child.status}\n{body}".rstrip("\n"))
    text = "\n\n".join(parts) + "\n"
    size = len(text.encode())
    return OutputInfo(
        text=text,
        truncated=any(c.output is not None and c.output.truncated for c in run.children),
        bytes=size,
        lines=text.count("\n"),
        partial=partial,
    )


def text_output(caps: OutputCaps, text: str, *, partial: bool) -> OutputInfo:
    """A whole text (a workflow's last step's) as output, capped like one child's."""
    capped = cap_text(text, caps.bytes, caps.lines)
    data = text.encode()
    return OutputInfo(
        text=capped.text,
        truncated=capped.truncated,
        bytes=len(data),
        lines=text.count("\n") + (0 if text.endswith("\n") or not text else 1),
        partial=partial,
    )
