"""Turn `spawn` params into a run plan: defaults applied, every problem found at once.

What the wire types cannot say is checked here: which of the request's shapes
was used, item counts, durations, working directories, environment names,
backends, and fields a backend cannot honour. Problems become diagnostics;
any error among them rejects the launch (`-32003`, or `-32002` when the only
problem is a backend that is not available).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from subagent_host.agents.definitions import AgentDefinition
from subagent_host.agents.discovery import AgentCatalog
from subagent_host.agents.effective import effective
from subagent_host.backends.base import Backend
from subagent_host.backends.probe import find_executable
from subagent_host.config import DEFAULT_STALL_TIMEOUT_MS, DEFAULT_TIMEOUT_MS
from subagent_host.errors import BackendUnavailable, LaunchRejected
from subagent_host.handlers.workflow_plan import plan_workflow
from subagent_host.rpc.wire import AccessWire, ParallelStep, SpawnItem, SpawnParams
from subagent_host.runs.plans import (
    EMPTY_PROMPT,
    FILESYSTEM_LEVELS,
    HOST_HARD,
    Access,
    AgentRef,
    ChildPlan,
    RunPlan,
    ServerLimits,
    WorkflowPlan,
    is_empty_prompt,
    negotiate,
    receipts,
)
from subagent_host.runs.state import RunKind
from subagent_host.settings import Settings
from subagent_host.values import MAX_DURATION_MS, MODES, SESSION_RESOURCES
from subagent_host.values.facts import Diagnostic

MAX_CHAIN_ITEMS: Final = 32
ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Most model responses `maxTurns` may allow (a day of one-second responses).
MAX_TURNS: Final = 100_000
# Fields only agent backends take; `command` cannot honour them (wire names).
AGENT_ONLY_FIELDS: Final = {
    "model": "model",
    "thinking": "thinking",
    "tools": "tools",
    "session_resources": "sessionResources",
    "max_turns": "maxTurns",
}


@attrs.frozen
class ResolvedSpawn:
    plan: RunPlan
    mode: str


@attrs.frozen
class CheckedSpawn:
    """A request checked: the plan when one could be made, and every problem found."""

    plan: RunPlan | None
    mode: str
    diagnostics: tuple[Diagnostic, ...]

    @property
    def accepted(self) -> bool:
        return self.plan is not None and not any(d.severity == "error" for d in self.diagnostics)


class Problems:
    """Diagnostics gathered while a request is checked."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []

    def error(self, code: str, message: str, path: str | None = None) -> None:
        self.items.append(Diagnostic("error", code, message, path))

    def info(self, code: str, message: str, path: str | None = None) -> None:
        self.items.append(Diagnostic("info", code, message, path))

    @property
    def failed(self) -> bool:
        return any(d.severity == "error" for d in self.items)


@attrs.frozen
class AgentSources:
    """What an `agent` item is looked up in, and the configured defaults every item gets."""

    settings: Settings = attrs.Factory(Settings)
    catalog: AgentCatalog | None = None
    """The agent definitions found for this request (None: none were looked for)."""


def uses_agents(params: SpawnParams) -> bool:
    """Whether any item names an agent definition (only then are definitions looked up)."""
    items: list[SpawnItem] = [*(params.tasks or ()), *(params.chain or ())]
    for step in params.workflow.chain if params.workflow is not None else ():
        if isinstance(step, SpawnItem):
            items.append(step)
        elif isinstance(step, ParallelStep):
            items.extend(step.parallel)
        else:
            items.append(step.item)
    return params.agent is not None or any(item.agent is not None for item in items)


def resolve_spawn(
    params: SpawnParams,
    *,
    backends: Mapping[str, Backend],
    limits: ServerLimits,
    depth: int,
    server_cwd: str,
    sources: AgentSources | None = None,
) -> ResolvedSpawn:
    """Validate and resolve; raise LaunchRejected / BackendUnavailable with diagnostics."""
    checked = check_spawn(
        params,
        backends=backends,
        limits=limits,
        depth=depth,
        server_cwd=server_cwd,
        sources=sources,
    )
    return accept(checked)


def accept(checked: CheckedSpawn) -> ResolvedSpawn:
    """The launch to run; LaunchRejected / BackendUnavailable when it has an error."""
    _raise_if_rejected(list(checked.diagnostics))
    assert checked.plan is not None
    return ResolvedSpawn(plan=checked.plan, mode=checked.mode)


def check_spawn(
    params: SpawnParams,
    *,
    backends: Mapping[str, Backend],
    limits: ServerLimits,
    depth: int,
    server_cwd: str,
    sources: AgentSources | None = None,
) -> CheckedSpawn:
    """Every problem of a launch request as diagnostics, and its plan when one can be made."""
    sources = sources or AgentSources()
    max_depth = limits.max_depth
    problems = Problems()
    if depth >= max_depth:
        problems.error(
            "max-depth",
            f"this server runs at delegation depth {depth} (the maximum is {max_depth}): "
            "a subagent may not start subagents",
        )
    shapes = [name for name in ("tasks", "chain", "workflow") if getattr(params, name) is not None]
    single = params.prompt is not None or params.agent is not None or params.command is not None
    if len(shapes) + single != 1:
        problems.error(
            "invalid-shape",
            "give exactly one of prompt/agent/command, tasks, chain or workflow",
        )

    def resolve(path: str, item: SpawnItem) -> ChildPlan:
        return _resolve_item(problems, path, item, params, backends, server_cwd, sources)

    kind = RunKind.SINGLE
    children: tuple[ChildPlan, ...] = ()
    workflow: WorkflowPlan | None = None
    if params.tasks is not None:
        kind = RunKind.PARALLEL
        _check_count(problems, "tasks", len(params.tasks), limits.max_parallel)
        children = tuple(resolve(f"tasks[{i}]", item) for i, item in enumerate(params.tasks))
    elif params.chain is not None:
        kind = RunKind.CHAIN
        _check_count(problems, "chain", len(params.chain), MAX_CHAIN_ITEMS)
        children = tuple(resolve(f"chain[{i}]", item) for i, item in enumerate(params.chain))
    elif params.workflow is not None:
        kind = RunKind.WORKFLOW
        cwd = _directory(Problems(), "cwd", params.cwd, server_cwd)  # reported by the items
        children, workflow = plan_workflow(
            problems, params.workflow, resolve, cwd, limits.max_parallel
        )
    elif single:
        top = SpawnItem(prompt=params.prompt, agent=params.agent, command=params.command)
        children = (resolve("", top),)

    mode = _mode(problems, params, children, sources)
    access = _access(problems, params.access)
    if problems.failed or not children:
        return CheckedSpawn(plan=None, mode=mode, diagnostics=tuple(problems.items))
    plan = RunPlan(
        kind=kind,
        children=children,
        label=params.label,
        stream=bool(params.stream),
        access=None if access.is_full else access,
        workflow=workflow,
    )
    _check_access(problems, plan, backends, access)
    _check_required_limits(problems, plan, backends, access, limits, params.required_limits)
    if not access.is_full:  # the children are launched with the tools access leaves them
        plan = attrs.evolve(
            plan,
            children=tuple(_narrowed(child, backends, access) for child in plan.children),
        )
    return CheckedSpawn(plan=plan, mode=mode, diagnostics=tuple(problems.items))


def _mode(
    problems: Problems, params: SpawnParams, children: tuple[ChildPlan, ...], sources: AgentSources
) -> str:
    """The request's mode, else a single agent's `subagent_mode`, else `default_mode`."""
    mode = params.mode
    if mode is None and params.agent is not None and len(children) == 1:
        definition = _definition(sources, params.agent)
        mode = definition.mode if definition is not None else None
    mode = mode or sources.settings.default_mode or "background"
    if mode not in MODES:
        problems.error("invalid-mode", f"mode must be one of {', '.join(sorted(MODES))}", "mode")
    return mode


def _narrowed(child: ChildPlan, backends: Mapping[str, Backend], access: Access) -> ChildPlan:
    backend = backends[child.backend]
    if not backend.restrictable:
        return child
    tools = negotiate(backend, child.tools, access)
    return attrs.evolve(
        child, tools=tuple(tools.kept), removed_tools=tuple(tools.removed), access=access
    )


def _access(problems: Problems, requested: AccessWire | None) -> Access:
    if requested is None:
        return Access()
    filesystem = requested.filesystem or "write"
    if filesystem not in FILESYSTEM_LEVELS:
        problems.error(
            "invalid-access",
            f"filesystem must be one of {', '.join(FILESYSTEM_LEVELS)}",
            "access.filesystem",
        )
        filesystem = "write"
    return Access(
        filesystem=filesystem,
        process=requested.process if requested.process is not None else True,
        network=requested.network if requested.network is not None else True,
    )


def _check_access(
    problems: Problems, plan: RunPlan, backends: Mapping[str, Backend], access: Access
) -> None:
    """A child left with no tool, or whose backend cannot be narrowed, cannot honour access."""
    if access.is_full:
        return
    for index, child in enumerate(plan.children):
        backend = backends[child.backend]
        tools = negotiate(backend, child.tools, access)
        path = f"children[{index}]" if len(plan.children) > 1 else None
        if not backend.restrictable and tools.removed:
            problems.error(
                "access-not-enforceable",
                f"the {child.backend} backend runs a program with your own permissions; "
                "it cannot be limited to the requested access (drop `access`, or use an "
                "agent backend whose tools can be narrowed)",
                path,
            )
        elif not tools.kept:
            problems.error(
                "no-tools-left", "the requested access removes every tool of this child", path
            )
        elif tools.removed:
            beyond = access.beyond(tools.removed)
            removed = ", ".join(f"{name} ({', '.join(beyond[name])})" for name in sorted(beyond))
            problems.info("tools-removed", f"removed for the requested access: {removed}", path)


def _check_required_limits(
    problems: Problems,
    plan: RunPlan,
    backends: Mapping[str, Backend],
    access: Access,
    limits: ServerLimits,
    required: tuple[str, ...] | None,
) -> None:
    if not required:
        return
    offered = {
        limit["name"]: limit["enforcement"]
        for limit in receipts(plan, backends, access, limits)["limits"]
    }
    unlimited = [i for i, child in enumerate(plan.children) if child.max_turns is None]
    for index, name in enumerate(required):
        enforcement = offered.get(name)
        if name == "maxTurns" and enforcement is not None and unlimited:
            problems.error(
                "limit-not-offered",
                f"maxTurns is not set for every child (none for children "
                f"{', '.join(map(str, unlimited))}): it cannot be required of the launch",
                f"requiredLimits[{index}]",
            )
        elif enforcement is None:
            problems.error(
                "limit-not-offered",
                f"no limit named {name!r} applies to this launch "
                f"(offered: {', '.join(sorted(offered))})",
                f"requiredLimits[{index}]",
            )
        elif enforcement != HOST_HARD:
            problems.error(
                "limit-not-enforceable",
                f"{name} is only {enforcement} here, and it was required to be {HOST_HARD}",
                f"requiredLimits[{index}]",
            )


def _check_count(problems: Problems, name: str, count: int, most: int) -> None:
    if not 1 <= count <= most:
        problems.error("item-count", f"{name} takes 1 to {most} items, not {count}", name)


def _definition(sources: AgentSources, name: str) -> AgentDefinition | None:
    found = sources.catalog.lookup(name) if sources.catalog is not None else None
    return found if isinstance(found, AgentDefinition) else None


def _resolve_item(
    problems: Problems,
    path: str,
    item: SpawnItem,
    call: SpawnParams,
    backends: Mapping[str, Backend],
    server_cwd: str,
    sources: AgentSources,
) -> ChildPlan:
    def at(name: str) -> str:
        return f"{path}.{name}" if path else name

    def pick(name: str) -> Any:
        value = getattr(item, name)
        return value if value is not None else getattr(call, name)

    definition = _agent(problems, at("agent"), item.agent, sources)
    if item.agent is not None and item.command is not None:
        problems.error("invalid-shape", "an item takes an agent or a command, not both", path)
    if item.command is None and item.prompt is None and item.agent is None:
        problems.error("empty-item", "an item needs a prompt, an agent or a command", path or None)
    if item.command is not None and (not item.command or not item.command[0]):
        problems.error("empty-command", "command must be a non-empty argv array", at("command"))

    settings = sources.settings
    wanted = effective(
        definition,
        settings,
        model=pick("model"),
        effort=pick("thinking"),
        tools=pick("tools"),
        session_resources=pick("session_resources"),
    )
    if wanted.removed_tools:
        problems.info(
            "tools-removed",
            f"a subagent may not delegate: removed {', '.join(wanted.removed_tools)}",
            at("tools"),
        )
    name = _choose_backend(item, call, settings.default_backend, wanted.model)
    backend = backends.get(name)
    cwd = _directory(problems, at("cwd"), pick("cwd"), server_cwd)
    env = _environment(problems, at("env"), {**(call.env or {}), **(item.env or {})})
    # Without a prompt, an agent's instructions are its task.
    prompt = item.prompt
    instructions = definition.instructions if definition is not None else None
    if prompt is None and instructions is not None:
        prompt, instructions = instructions, None
    if backend is None:
        problems.error(
            "backend-unavailable",
            f"backend {name!r} is not known to this server (known: {', '.join(sorted(backends))})",
            at("backend"),
        )
    elif name == "command":
        if item.command is None:
            problems.error("missing-command", "the command backend needs a command", at("command"))
        if item.agent is not None:
            problems.error(
                "not-honoured", "the command backend cannot run an agent definition", at("backend")
            )
        for field, wire_name in AGENT_ONLY_FIELDS.items():
            if pick(field) is not None:
                problems.error(
                    "not-honoured", f"the command backend cannot honour {wire_name}", at(wire_name)
                )
    else:
        _check_agent_item(
            problems, at, item, backend, prompt, wanted.tools, wanted.effort, cwd, env
        )
        if wanted.session_resources not in SESSION_RESOURCES:
            problems.error(
                "invalid-session-resources",
                f"sessionResources must be one of {', '.join(SESSION_RESOURCES)}, "
                f"not {wanted.session_resources!r}",
                at("sessionResources"),
            )

    timeout_ms = _duration(
        problems,
        at("timeoutMs"),
        pick("timeout_ms"),
        settings.timeout_ms or DEFAULT_TIMEOUT_MS,
    )
    stall_ms = _duration(
        problems,
        at("stallTimeoutMs"),
        pick("stall_timeout_ms"),
        settings.stall_timeout_ms or DEFAULT_STALL_TIMEOUT_MS,
    )
    max_turns = _turns(problems, at("maxTurns"), pick("max_turns"))
    is_agent = name != "command"
    return ChildPlan(
        backend=name,
        cwd=cwd,
        timeout_ms=timeout_ms,
        stall_timeout_ms=stall_ms,
        command=item.command,
        prompt=prompt,
        env=env,
        label=item.label,
        model=wanted.model if is_agent else None,
        thinking=wanted.effort if is_agent else None,
        tools=wanted.tools if is_agent else None,
        instructions=instructions if is_agent else None,
        session_resources=wanted.session_resources if is_agent else None,
        agent=_agent_ref(definition),
        output_name=item.as_,
        max_turns=max_turns if is_agent else None,
    )


def _agent(
    problems: Problems, path: str, name: str | None, sources: AgentSources
) -> AgentDefinition | None:
    """The definition an `agent` item names; a diagnostic when there is none to use."""
    if name is None:
        return None
    found = sources.catalog.lookup(name) if sources.catalog is not None else None
    if isinstance(found, AgentDefinition):
        return found
    if found is None:
        known = sorted(sources.catalog.agents) if sources.catalog is not None else []
        problems.error(
            "unknown-agent",
            f"no agent definition named {name!r} (known: {', '.join(known) or 'none'}; "
            "see agents/list)",
            path,
        )
    else:  # a malformed definition of that name blocks it, rather than fall back
        problems.error(
            "agent-blocked",
            f"the agent definition {name!r} cannot be used: {found.message}",
            path,
        )
    return None


def _agent_ref(definition: AgentDefinition | None) -> AgentRef | None:
    if definition is None:
        return None
    return AgentRef(
        name=definition.name,
        source=definition.source,
        path=definition.path,
        digest=definition.digest,
    )


def _check_agent_item(
    problems: Problems,
    at: Callable[[str], str],
    item: SpawnItem,
    backend: Backend,
    prompt: str | None,
    tools: tuple[str, ...] | None,
    thinking: str | None,
    cwd: str,
    env: Mapping[str, str],
) -> None:
    """An agent child: a prompt, its program on the child's PATH, tools and thinking it knows."""
    if item.command is not None:
        problems.error(
            "not-honoured", f"the {backend.id} backend takes a prompt, not a command", at("command")
        )
    if prompt is None and item.agent is None:  # an unknown agent was reported already
        problems.error("missing-prompt", f"the {backend.id} backend needs a prompt", at("prompt"))
    elif item.prompt is not None and is_empty_prompt(backend.id, item.prompt):
        problems.error(
            EMPTY_PROMPT,
            f"the {backend.id} backend needs a prompt with text in it, not an empty "
            "or whitespace-only one",
            at("prompt"),
        )
    elif is_empty_prompt(backend.id, prompt):  # no prompt, and the agent's body is empty
        problems.error(
            "missing-prompt",
            f"agent {item.agent!r} has no instructions to take as its task: give a prompt",
            at("prompt"),
        )
    program = backend.executable
    if find_executable(program, cwd, env.get("PATH")) is None:
        problems.error(
            "backend-unavailable",
            f"the {backend.id} backend needs {program!r}, which is not on the child's PATH "
            "(install the pinned agent CLIs with scripts/install-agents, or set PATH in env)",
            at("backend"),
        )
    if tools == () and backend.tools_required:
        problems.error(
            "tools-required",
            f"{backend.id} always has tools (its shell, confined by its sandbox), so it "
            f"cannot run with none; name the narrowest it may have instead "
            f"(it has: {', '.join(backend.tools)})",
            at("tools"),
        )
    for index, tool in enumerate(tools or ()):
        if tool not in backend.tools:
            problems.error(
                "unknown-tool",
                f"{backend.id} has no tool {tool!r} (it has: {', '.join(sorted(backend.tools))})",
                f"{at('tools')}[{index}]",
            )
    levels = backend.thinking_levels
    if thinking is not None and thinking not in levels:
        problems.error(
            "invalid-thinking",
            f"{backend.id} takes thinking {', '.join(levels) or '(none)'}, not {thinking!r}",
            at("thinking"),
        )


def _choose_backend(
    item: SpawnItem, call: SpawnParams, default_backend: str | None, model: str | None
) -> str:
    """Explicit backend wins; a command means `command`; then the configured default;
    then a bare claude-* model means claude; else pi."""
    explicit = item.backend or call.backend
    if explicit:
        return explicit
    if item.command is not None:
        return "command"
    if default_backend is not None:
        return default_backend
    if model and model.startswith("claude-"):
        return "claude"
    return "pi"


def _duration(problems: Problems, path: str, value: int | None, default: int) -> int:
    if value is None:
        return default
    if not 1 <= value <= MAX_DURATION_MS:
        problems.error("invalid-duration", f"must be 1..{MAX_DURATION_MS} ms", path)
    return value


def _turns(problems: Problems, path: str, value: int | None) -> int | None:
    if value is not None and not 1 <= value <= MAX_TURNS:
        problems.error("invalid-max-turns", f"must be 1..{MAX_TURNS} model responses", path)
    return value


def _directory(problems: Problems, path: str, value: str | None, default: str) -> str:
    real = os.path.realpath(os.path.expanduser(value) if value is not None else default)
    if not os.path.isdir(real):
        problems.error("invalid-cwd", f"{value!r} is not an existing directory", path)
    return real


def _environment(problems: Problems, path: str, env: Mapping[str, str]) -> dict[str, str]:
    for name, value in env.items():
        if ENV_NAME.fullmatch(name) is None:
            problems.error(
                "invalid-env", f"{name!r} is not a valid variable name", f"{path}.{name}"
            )
        elif "\0" in value:
            problems.error("invalid-env", "values cannot contain NUL", f"{path}.{name}")
    return dict(env)


def _raise_if_rejected(diagnostics: list[Diagnostic]) -> None:
    errors = [d for d in diagnostics if d.severity == "error"]
    if not errors:
        return
    data = {"diagnostics": [attrs.asdict(d, filter=lambda _a, v: v is not None) for d in errors]}
    if all(d.code == "backend-unavailable" for d in errors):
        raise BackendUnavailable(errors[0].message, data=data)
    summary = "; ".join(d.message for d in errors[:3])
    raise LaunchRejected(f"launch rejected: {summary}", data=data)
