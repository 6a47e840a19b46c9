"""What a launch request says: the params of `spawn` and `preflight` that planning reads.

Plain attrs values that import nothing of ours (an import-linter contract keeps it
so): `rpc/wire.py` builds them from JSON with its converter (camelCase on the
wire, strict primitives) and `planning/` checks them, so the wire and the domain
share one set of types instead of copying fields between twins.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class ItemFields:
    """What an item and the call both take; an item's own value overrides the call's."""

    prompt: str | None = None
    agent: str | None = None
    command: tuple[str, ...] | None = None
    label: str | None = None
    backend: str | None = None
    model: str | None = None
    thinking: str | None = None
    tools: tuple[str, ...] | None = None
    cwd: str | None = None
    env: dict[str, str] | None = None
    timeout_ms: int | None = None
    stall_timeout_ms: int | None = None
    session_resources: str | None = None
    """`lean` or `full`: what an agent child loads of the user's and project's resources."""
    max_turns: int | None = None
    """Model responses an agent child may make (protocol.md §8.1); agent backends only."""


@attrs.frozen
class SpawnItem(ItemFields):
    """One child of a `tasks` or `chain` spawn."""

    as_: str | None = None


@attrs.frozen
class StepFields:
    """What a `parallel` and a `forEach` step both take."""

    as_: str | None = None
    """Names the step's output: a JSON array of its items' final texts."""
    label: str | None = None


@attrs.frozen(kw_only=True)
class ParallelStep(StepFields):
    """A workflow step running its items side by side (at most 4 at once)."""

    parallel: tuple[SpawnItem, ...]


@attrs.frozen(kw_only=True)
class ForEachStep(StepFields):
    """A workflow step running `item` once per element of the JSON array `for_each` yields."""

    for_each: str
    item: SpawnItem


WorkflowStep = SpawnItem | ParallelStep | ForEachStep


@attrs.frozen
class WorkflowRequest:
    name: str
    task: str
    chain: tuple[WorkflowStep, ...]
    snapshot_path: str | None = None
    """A file rewritten (atomically, mode 0600) with the run's snapshot after each step."""


@attrs.frozen
class AccessRequest:
    """What the children may do: tools with larger effects are removed (preflight)."""

    filesystem: str | None = None
    """`none`, `read` or `write` (the default)."""
    process: bool | None = None
    network: bool | None = None


@attrs.frozen
class LaunchRequest(ItemFields):
    """A launch: one item (the call's own prompt/agent/command), `tasks`, `chain` or a
    `workflow`, with what applies to all of its children."""

    tasks: tuple[SpawnItem, ...] | None = None
    chain: tuple[SpawnItem, ...] | None = None
    workflow: WorkflowRequest | None = None
    mode: str | None = None
    stream: bool | None = None
    access: AccessRequest | None = None
    required_limits: tuple[str, ...] | None = None
    """Limits that must be enforced by the server itself (`host-hard`)."""
