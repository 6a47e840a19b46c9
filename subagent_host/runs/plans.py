"""What a launch would run, sealed: the normalized plan, its fingerprint, and its receipts.

`normalized_plan` is what `preflight` shows and what both `preflight` and
`spawn` fingerprint (`sha256:v1:` + SHA-256 of its canonical JSON), so a spawn
matches its preflight exactly when it would run the same thing. Keys are the
wire's camelCase: the plan is sent as it is.

Receipts are honest statements, not promises: `access` says children run with
the user's own OS permissions (`shared-user`) and which tools, with which
effects, they get; `limits` says which limits the server enforces by ending the
process tree (`host-hard`) and which it only asks for (`best-effort`). A limit
the server counts itself from a CLI's events (`maxTurns`) is `host-hard` for
every CLI, even where the CLI is also told (claude's `--max-turns`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

import attrs

from subagent_host.backends.base import (
    EFFECTS,
    FILESYSTEM_READ,
    FILESYSTEM_WRITE,
    NETWORK,
    PROCESS,
    Backend,
    ItemSpec,
)
from subagent_host.runs.fingerprint import PREFIX, fingerprint
from subagent_host.runs.state import RunKind
from subagent_host.values import FULL

EXECUTION_BOUNDARY: Final = "shared-user"
HOST_HARD: Final = "host-hard"
BEST_EFFORT: Final = "best-effort"
FILESYSTEM_LEVELS: Final = ("none", "read", "write")


@attrs.frozen
class Access:
    """What a request lets its children do (all of it by default)."""

    filesystem: str = "write"
    process: bool = True
    network: bool = True

    def permitted(self) -> frozenset[str]:
        effects = set()
        if self.filesystem in ("read", "write"):
            effects.add(FILESYSTEM_READ)
        if self.filesystem == "write":
            effects.add(FILESYSTEM_WRITE)
        if self.process:
            effects.add(PROCESS)
        if self.network:
            effects.add(NETWORK)
        return frozenset(effects)

    def beyond(self, tools: Mapping[str, list[str]]) -> dict[str, list[str]]:
        """Per tool, the effects it has that this access does not permit."""
        allowed = self.permitted()
        return {name: [e for e in effects if e not in allowed] for name, effects in tools.items()}

    @property
    def is_full(self) -> bool:
        return self.permitted() == frozenset(EFFECTS)


@attrs.frozen
class AgentRef:
    """The agent definition a child was launched from: which file, and its digest."""

    name: str
    source: str
    """`user` or `project`."""
    path: str
    """The definition file's real path."""
    digest: str


@attrs.frozen
class ChildPlan:
    """One child, resolved: the wire's item after defaults and validation."""

    backend: str
    cwd: str
    timeout_ms: int
    stall_timeout_ms: int
    command: tuple[str, ...] | None = None
    prompt: str | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    label: str | None = None
    model: str | None = None
    thinking: str | None = None
    tools: tuple[str, ...] | None = None
    resume_session: str | None = None
    """The agent CLI's own session a resumed attempt continues."""
    access: Access | None = None
    """The request's access, when it narrowed the default."""
    removed_tools: tuple[str, ...] = ()
    """The tools the request's access took away (`tools` holds what is left)."""
    instructions: str | None = None
    """The agent definition's body, given to the CLI as system-prompt instructions."""
    agent: AgentRef | None = None
    output_name: str | None = None
    """A workflow item's `as`: the name its final text is known by in later steps."""
    session_resources: str | None = None
    """An agent child's `lean` or `full`; None for a command child, and for a child
    resumed from a projection recorded before the field existed (it ran `full`)."""
    max_turns: int | None = None
    """Model responses an agent child may make; the server counts them (None: no limit)."""

    @property
    def limits(self) -> dict[str, int]:
        """The child's own limits, as the plan, the projection and a resume spell them."""
        limits = {"timeoutMs": self.timeout_ms, "stallTimeoutMs": self.stall_timeout_ms}
        if self.max_turns is not None:
            limits["maxTurns"] = self.max_turns
        return limits

    def item(self, prompt: str | None = None) -> ItemSpec:
        """What the backend is given to launch this child (`prompt` replaces the plan's)."""
        return ItemSpec(
            command=self.command,
            prompt=prompt if prompt is not None else self.prompt,
            cwd=self.cwd,
            env=self.env,
            model=self.model,
            thinking=self.thinking,
            tools=self.tools,
            resume_session=self.resume_session,
            filesystem_access=self.access.filesystem if self.access else "write",
            network_access=self.access.network if self.access else True,
            instructions=self.instructions,
            session_resources=self.session_resources or FULL,
            max_turns=self.max_turns,
        )


# An agent CLI given no text to work on would only spend a model call on nothing;
# a `command` child's prompt is just its stdin, and may be empty.
EMPTY_PROMPT: Final = "empty-prompt"


def is_empty_prompt(backend: str, prompt: str | None) -> bool:
    """An agent backend's prompt that is empty or only whitespace (never `command`'s)."""
    return backend != "command" and prompt is not None and not prompt.strip()


STEP_PROMPT: Final = "prompt"
STEP_PARALLEL: Final = "parallel"
STEP_FOR_EACH: Final = "forEach"


@attrs.frozen
class StepPlan:
    """One workflow step: which of the plan's children are its items, and how they run.

    A `prompt` step has one item, a `parallel` step several; a `forEach` step
    has one item, run once per element of the array its `over` template yields.
    Item prompts (and labels) are templates, filled when the step starts.
    """

    kind: str
    items: tuple[int, ...]
    output_name: str | None = None
    over: str | None = None
    label: str | None = None


@attrs.frozen
class WorkflowPlan:
    name: str
    task: str
    steps: tuple[StepPlan, ...]
    snapshot_path: str | None = None


@attrs.frozen
class RunPlan:
    kind: RunKind
    children: tuple[ChildPlan, ...]
    """The children to run; for a workflow, its item templates (children are made per step)."""
    label: str | None = None
    stream: bool = False
    access: Access | None = None
    workflow: WorkflowPlan | None = None


@attrs.frozen
class ServerLimits:
    """The server-wide limits a receipt reports beside each child's own."""

    output_cap_bytes: int
    output_cap_lines: int
    previous_cap_bytes: int
    max_concurrency: int
    max_depth: int
    max_parallel: int = 8
    workflow_parallelism: int = 4


@attrs.frozen
class Negotiated:
    """One child's tools after the request's access was applied."""

    kept: dict[str, list[str]]
    removed: dict[str, list[str]]


def negotiate(
    backend: Backend,
    requested: tuple[str, ...] | None,
    access: Access,
    already_removed: tuple[str, ...] = (),
) -> Negotiated:
    """The child's tools (the requested ones, else the whole catalog) within `access`.

    `already_removed` are tools an earlier narrowing took out of `requested`: they
    are reported as removed again, so a narrowed plan's receipt still says so.
    """
    names = requested if requested is not None else default_tools(backend)
    allowed = access.permitted()
    kept: dict[str, list[str]] = {}
    removed: dict[str, list[str]] = {
        name: sorted(backend.tools.get(name, frozenset())) for name in already_removed
    }
    for name in names:
        effects = sorted(backend.tools.get(name, frozenset()))
        (kept if set(effects) <= allowed else removed)[name] = effects
    return Negotiated(kept=kept, removed=removed)


def default_tools(backend: Backend) -> tuple[str, ...]:
    """The tools a child gets when the request names none (the CLI's own default)."""
    defaults: tuple[str, ...] | None = getattr(backend, "default_tools", None)
    return defaults if defaults is not None else tuple(backend.tools)


def digest(text: str) -> str:
    return PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalized_plan(
    plan: RunPlan, backends: Mapping[str, Backend], access: Access | None = None
) -> dict[str, Any]:
    """The plan as preflight shows it (environment values left out: they may be secrets)."""
    access = access or Access()
    children = []
    for index, child in enumerate(plan.children):
        backend = backends[child.backend]
        launch = backend.prepare(child.item())
        tools = negotiate(backend, child.tools, access, child.removed_tools)
        entry: dict[str, Any] = {
            "index": index,
            "backend": child.backend,
            "argv": list(launch.argv),
            "cwd": child.cwd,
            "model": child.model,
            "thinking": child.thinking,
            "sessionResources": child.session_resources,
            "tools": sorted(tools.kept),
            "envKeys": sorted(child.env),
            "promptDigest": digest(child.prompt) if child.prompt is not None else None,
            "limits": child.limits,
        }
        if tools.removed:
            entry["removedTools"] = sorted(tools.removed)
        if child.agent is not None:
            entry["agent"] = attrs.asdict(child.agent)
        if child.output_name is not None:
            entry["as"] = child.output_name
        children.append({key: value for key, value in entry.items() if value is not None})
    normalized: dict[str, Any] = {"kind": str(plan.kind), "children": children}
    if not access.is_full:
        normalized["access"] = attrs.asdict(access)
    if plan.workflow is not None:
        normalized["workflow"] = _normalized_workflow(plan.workflow)
    return normalized


def _normalized_workflow(workflow: WorkflowPlan) -> dict[str, Any]:
    """The workflow's shape: steps refer to `children` (item templates) by index."""
    steps = []
    for index, step in enumerate(workflow.steps):
        entry: dict[str, Any] = {"index": index, "kind": step.kind, "items": list(step.items)}
        if step.output_name is not None:
            entry["as"] = step.output_name
        if step.over is not None:
            entry["forEach"] = step.over
        if step.label is not None:
            entry["label"] = step.label
        steps.append(entry)
    normalized: dict[str, Any] = {
        "name": workflow.name,
        "taskDigest": digest(workflow.task),
        "steps": steps,
    }
    if workflow.snapshot_path is not None:
        normalized["snapshotPath"] = workflow.snapshot_path
    return normalized


def plan_fingerprint(plan: RunPlan, backends: Mapping[str, Backend], access: Access | None) -> str:
    return fingerprint(normalized_plan(plan, backends, access))


def receipts(
    plan: RunPlan, backends: Mapping[str, Backend], access: Access, server: ServerLimits
) -> dict[str, Any]:
    """What the children may do, and how each limit is enforced."""
    children = []
    for index, child in enumerate(plan.children):
        backend = backends[child.backend]
        tools = negotiate(backend, child.tools, access, child.removed_tools)
        effects = sorted({effect for kept in tools.kept.values() for effect in kept})
        beyond = access.beyond(tools.removed)
        children.append(
            {
                "index": index,
                "backend": child.backend,
                "tools": [{"name": name, "effects": e} for name, e in sorted(tools.kept.items())],
                # Each removed tool with the effects that took it out: what `access`
                # did not permit.
                "removedTools": [
                    {"name": name, "effects": e, "exceeds": beyond[name]}
                    for name, e in sorted(tools.removed.items())
                ],
                "effects": effects,
                "restrictable": backend.restrictable,
                **(
                    {"sessionResources": child.session_resources}
                    if child.session_resources is not None
                    else {}
                ),
            }
        )
    timeouts = [child.timeout_ms for child in plan.children]
    stalls = [child.stall_timeout_ms for child in plan.children]
    limits = [
        _limit("timeoutMs", max(timeouts), HOST_HARD, "the tree is ended when it runs longer"),
        _limit(
            "stallTimeoutMs", max(stalls), HOST_HARD, "the tree is ended after this long silent"
        ),
        _limit(
            "outputCapBytes", server.output_cap_bytes, HOST_HARD, "output kept beyond it is cut"
        ),
        _limit("outputCapLines", server.output_cap_lines, HOST_HARD, "as outputCapBytes"),
        _limit("previousCapBytes", server.previous_cap_bytes, HOST_HARD, "{previous} is cut to it"),
        _limit(
            "maxConcurrency", server.max_concurrency, HOST_HARD, "children beyond it wait queued"
        ),
        _limit("maxDepth", server.max_depth, HOST_HARD, "a child's own spawns are refused"),
    ]
    turns = [child.max_turns for child in plan.children if child.max_turns is not None]
    if turns:
        limits.append(
            _limit(
                "maxTurns",
                max(turns),
                HOST_HARD,
                "the server counts each model response from the CLI's events and ends the "
                "tree when response N + 1 begins (claude also gets --max-turns)",
            )
        )
    if plan.workflow is not None:
        limits.append(
            _limit(
                "workflowParallelism",
                server.workflow_parallelism,
                HOST_HARD,
                "children of a step beyond it wait queued",
            )
        )
    return {
        "access": {"executionBoundary": EXECUTION_BOUNDARY, "children": children},
        "limits": limits,
    }


def _limit(name: str, value: int, enforcement: str, how: str) -> dict[str, Any]:
    return {"name": name, "value": value, "enforcement": enforcement, "how": how}
