"""The short text each tool answers beside its structured content.

An MCP client shows a model the text (several show it nothing else), so the text
says what a model acts on: the run's id, its status, how it ended, its final output
(cut to the server's output caps, marked `[output truncated]`), and what to call next.
The structured content is the protocol's own result, whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from subagent_host.rpc.wire import (
    AgentDisabledInfo,
    AgentsListResult,
    ChildSnapshot,
    InterruptResult,
    RunList,
    RunSnapshot,
    SendResult,
)
from subagent_host.values import TERMINAL
from subagent_host.values.choices import TurnState
from subagent_host.values.facts import Diagnostic, Usage

SENT_AS_POLICY: Final = (
    'approvals: "client" was sent as "policy": this MCP client cannot be asked (no form '
    "elicitation)"
)
BY_POLICY: Final = f"{SENT_AS_POLICY}, so the server answers the permissions from the run's access"
"""The last line of a spawn whose `approvals: "client"` the face sent as `policy`."""
REFUSED_AS_POLICY: Final = (
    f'{SENT_AS_POLICY}, so the refusal above is of "policy", not of the "client" asked for'
)
"""The last line of the refusal of such a spawn: the server's words name `policy`, which
the caller never wrote."""


def run_text(run: RunSnapshot) -> str:
    """A run: a headline, its children when there are several, its error, usage and output."""
    label = f", {run.label!r}" if run.label else ""
    lines = [f"run {run.run_id} ({run.kind}{label}): {run.status}{_took(run.duration_ms)}"]
    if waits_for_input(run):
        lines.append(
            f"waiting for input: call send with runId {run.run_id} and a text (or close it)"
        )
    elif run.status not in TERMINAL:
        lines.append(f"still going: call wait with runId {run.run_id} (or stop it)")
    if len(run.children) > 1 or any(child.turn is not None for child in run.children):
        lines += [
            f"child {child.index} ({child.backend}): {child.status}{_turn(child)}"
            for child in run.children
        ]
    lines += [
        f"child {asked.index} asks to use {asked.name} ({asked.kind}): {asked.summary}"
        for asked in run.pending_permissions or ()
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


def waits_for_input(run: RunSnapshot) -> bool:
    """Whether the run is going but nothing in it moves until it is sent a message: each
    child still going is an interactive child between turns."""
    going = [child for child in run.children if child.status not in TERMINAL]
    return (
        run.status not in TERMINAL and bool(going) and all(_between_turns(child) for child in going)
    )


def send_text(run_id: str, result: SendResult) -> str:
    return (
        f"message {result.message_id} to run {run_id}: {result.state}\n"
        f"for the reply, call wait with runId {run_id}"
    )


def interrupt_text(run_id: str, result: InterruptResult) -> str:
    if result.interrupted:
        return f"run {run_id}: turn {result.turn.count} is being interrupted"
    return f"run {run_id}: no turn was running (turn {result.turn.count}, {result.turn.state})"


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


def _between_turns(child: ChildSnapshot) -> bool:
    return child.turn is not None and child.turn.state is TurnState.WAITING


def _turn(child: ChildSnapshot) -> str:
    turn = child.turn
    if turn is None:
        return ""
    if child.status in TERMINAL:
        return f" after {turn.count} turn{'s' if turn.count != 1 else ''}"
    doing = "waiting for input" if turn.state is TurnState.WAITING else "working"
    return f", turn {turn.count}, {doing}"


def _took(duration_ms: int | None) -> str:
    return f" in {duration_ms / 1000:.1f} s" if duration_ms is not None else ""
