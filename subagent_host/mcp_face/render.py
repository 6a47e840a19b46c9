"""The short text each tool answers beside its structured content.

An MCP client shows a model the text (several show it nothing else), so the text
says what a model acts on: the run's id, its status, how it ended, its final output
(cut to the server's output caps, marked `[output truncated]`), and what to call next.
The structured content is the protocol's own result, whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from subagent_host.rpc.wire import AgentDisabledInfo, AgentsListResult, RunList, RunSnapshot
from subagent_host.values import TERMINAL
from subagent_host.values.facts import Diagnostic, Usage


def run_text(run: RunSnapshot) -> str:
    """A run: a headline, its children when there are several, its error, usage and output."""
    label = f", {run.label!r}" if run.label else ""
    lines = [f"run {run.run_id} ({run.kind}{label}): {run.status}{_took(run.duration_ms)}"]
    if run.status not in TERMINAL:
        lines.append(f"still going: call wait with runId {run.run_id} (or stop it)")
    if len(run.children) > 1:
        lines += [
            f"child {child.index} ({child.backend}): {child.status}" for child in run.children
        ]
    if run.error is not None:
        lines.append(f"error {run.error.code}: {run.error.message}")
    elif run.reason and run.status != "completed":
        lines.append(f"reason: {run.reason}")
    if run.usage is not None:
        lines.append(f"usage: {usage_text(run.usage)}")
    if run.output is not None and run.output.text:
        lines += ["output:", run.output.text]
    return "\n".join(lines)


def runs_text(listing: RunList) -> str:
    """This session's runs, newest first, one line each."""
    if not listing.runs:
        return "no runs in this session yet"
    return "\n".join(
        f"{run.run_id} {run.status} {run.kind}" + (f" {run.label!r}" if run.label else "")
        for run in listing.runs
    )


def agents_text(result: AgentsListResult) -> str:
    """The agent definitions, one line each, then the problems found."""
    lines = [
        f"{agent.name} ({agent.source}): {agent.description}" + disabled_text(agent.disabled)
        for agent in result.agents
    ]
    lines = lines or ["no agent definitions found"]
    return "\n".join(lines + diagnostics_lines(result.diagnostics))


def disabled_text(disabled: AgentDisabledInfo | None) -> str:
    if disabled is None:
        return ""
    pattern = f" pattern {disabled.pattern!r}" if disabled.pattern is not None else ""
    return f" [disabled by {disabled.by}{pattern} of {disabled.file}]"


def diagnostics_lines(diagnostics: Sequence[Diagnostic]) -> list[str]:
    return [
        f"{item.severity} {item.code}" + (f" at {item.path}" if item.path else "") + f": "
        f"{item.message}"
        for item in diagnostics
    ]


def usage_text(usage: Usage) -> str:
    cost = f", ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
    return f"{usage.input_tokens} input and {usage.output_tokens} output tokens{cost}"


def _took(duration_ms: int | None) -> str:
    return f" in {duration_ms / 1000:.1f} s" if duration_ms is not None else ""
