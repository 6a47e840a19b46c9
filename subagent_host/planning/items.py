"""Resolve one item of a launch request into a child plan, every problem found at once.

An item's own fields override the call's, then an agent definition's and the
configured defaults apply (`agents/effective.py`). What the wire types cannot
say is checked here: durations, working directories, environment names, the
backend and fields it cannot honour, an agent child's prompt, program, tools
and thinking level, and how it is driven (`interactive`, `approvals` its CLI can
ask for, the executor it would run on).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import attrs

from subagent_host.agents.definitions import AgentDefinition
from subagent_host.agents.delegation import WHY
from subagent_host.agents.discovery import AgentCatalog
from subagent_host.agents.effective import effective
from subagent_host.backends.base import Backend
from subagent_host.backends.budgets import MAX_COST_USD, MAX_TOKENS, NOT_REPORTED, unreported
from subagent_host.backends.interactive.base import APPROVALS_UNSUPPORTED
from subagent_host.backends.probe import find_executable
from subagent_host.config import (
    DEFAULT_IDLE_TIMEOUT_MS,
    DEFAULT_PERMISSION_TIMEOUT_MS,
    DEFAULT_STALL_TIMEOUT_MS,
    DEFAULT_TIMEOUT_MS,
)
from subagent_host.planning.approvals import unsupported
from subagent_host.planning.plan import EMPTY_PROMPT, ChildPlan, is_empty_prompt
from subagent_host.planning.problems import Problems
from subagent_host.planning.request import LaunchRequest, SpawnItem
from subagent_host.planning.views import AgentRef
from subagent_host.settings import Settings
from subagent_host.values import (
    ISOLATIONS,
    MAX_DURATION_MS,
    MAX_SAFE_INTEGER,
    SESSION_RESOURCES,
    WORKTREE,
    Isolation,
    SessionResources,
)
from subagent_host.values.choices import Approvals, member
from subagent_host.values.placement import Placement
from subagent_host.workspaces.worktrees import (
    CWD_OUTSIDE_WORKTREE,
    outside_repository,
    repository_root,
)

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
    "max_tokens": MAX_TOKENS,
    "max_cost_usd": MAX_COST_USD,
}

# A budget's name in the configuration files (§19), by its wire name.
SETTING_NAMES: Final = {MAX_TOKENS: "max_tokens", MAX_COST_USD: "max_cost_usd"}
N = TypeVar("N", int, float)


@attrs.frozen
class AgentSources:
    """What an `agent` item is looked up in, and the configured defaults every item gets."""

    settings: Settings = attrs.Factory(Settings)
    catalog: AgentCatalog | None = None
    """The agent definitions found for this request (None: none were looked for)."""
    placeable: bool = False
    """True when the server's executor places children on a cluster (`--executor ray`);
    the local one runs them all here, and refuses a `placement` it could not honour."""


@attrs.frozen
class ItemResolver:
    """Resolves the items of one request (its call's fields apply to each), into one
    list of problems."""

    problems: Problems
    call: LaunchRequest
    backends: Mapping[str, Backend]
    server_cwd: str
    sources: AgentSources

    interactive: list[str] = attrs.field(factory=list)
    """The `interactive` fields (paths) of the interactive children resolved so far."""

    def resolve(self, path: str, item: SpawnItem) -> ChildPlan:
        """The child plan of the item at `path` (`""` for the call's own item)."""
        child = _resolve_item(
            self.problems, path, item, self.call, self.backends, self.server_cwd, self.sources
        )
        if child.interactive:
            self.interactive.append(f"{path}.interactive" if path else "interactive")
        return child


def definition_named(sources: AgentSources, name: str) -> AgentDefinition | None:
    """The usable definition named `name`, if there is one (no diagnostic otherwise)."""
    found = sources.catalog.lookup(name) if sources.catalog is not None else None
    return found if isinstance(found, AgentDefinition) else None


def _resolve_item(
    problems: Problems,
    path: str,
    item: SpawnItem,
    call: LaunchRequest,
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
            f"removed {', '.join(wanted.removed_tools)}: {WHY}",
            at("tools"),
        )
    name = _choose_backend(
        item,
        call,
        definition.backend if definition is not None else None,
        settings.default_backend,
        wanted.model,
    )
    backend = backends.get(name)
    cwd = directory(problems, at("cwd"), pick("cwd"), server_cwd)
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
    elif backend.configures_itself:
        _check_agent_item(problems, at, item, backend, prompt, None, None, cwd, env)
        _check_own_choices(problems, at, pick, definition, backend)
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
    budget = _Budgets(problems, at, _budget_backend(name, backend))
    max_tokens = budget.pick(
        MAX_TOKENS,
        _tokens(problems, at(MAX_TOKENS), pick("max_tokens")),
        definition.max_tokens if definition is not None else None,
        settings.max_tokens,
    )
    max_cost_usd = budget.pick(
        MAX_COST_USD,
        _cost(problems, at(MAX_COST_USD), pick("max_cost_usd")),
        definition.max_cost_usd if definition is not None else None,
        settings.max_cost_usd,
    )
    isolation = _isolation(
        problems,
        at("isolation"),
        pick("isolation") or (definition.isolation if definition is not None else None),
        cwd,
        given_directory(pick("cwd"), server_cwd),
    )
    placement = _placement(problems, at("placement"), pick("placement"), sources.placeable)
    driven = _driven(problems, at, pick, definition, settings.approvals, name)
    is_agent = name != "command"
    # An agent that configures itself (an ACP agent) chooses its own model, effort, tools
    # and what it loads (refused above when asked for): nothing of a CLI's defaults
    # reaches it.
    is_cli = is_agent and (backend is None or not backend.configures_itself)
    return ChildPlan(
        backend=name,
        cwd=cwd,
        timeout_ms=timeout_ms,
        stall_timeout_ms=stall_ms,
        command=item.command,
        prompt=prompt,
        env=env,
        label=item.label,
        model=wanted.model if is_cli else None,
        thinking=wanted.effort if is_cli else None,
        tools=wanted.tools if is_cli else None,
        instructions=instructions if is_agent else None,
        session_resources=member(SessionResources, wanted.session_resources) if is_cli else None,
        agent=_agent_ref(definition),
        output_name=item.output_name,
        max_turns=max_turns if is_agent else None,
        max_tokens=max_tokens if is_agent else None,
        max_cost_usd=max_cost_usd if is_agent else None,
        isolation=isolation,
        placement=placement,
        redact=pick("redact") is not False,
        interactive=driven.interactive,
        approvals=driven.approvals,
        idle_timeout_ms=driven.idle_timeout_ms,
        permission_timeout_ms=driven.permission_timeout_ms,
    )


@attrs.frozen
class _Driven:
    """How an item's child is talked to: the `ChildPlan` fields of protocol.md §23."""

    interactive: bool = False
    approvals: Approvals = Approvals.CLI
    idle_timeout_ms: int | None = None
    permission_timeout_ms: int | None = None


def _driven(
    problems: Problems,
    at: Callable[[str], str],
    pick: Callable[[str], Any],
    definition: AgentDefinition | None,
    configured: str | None,
    backend: str,
) -> _Driven:
    """`interactive` and `approvals`: the request's (an item's over the call's), else the
    definition's, else the configuration's; their timeouts set only where they apply."""
    interactive = pick("interactive")
    if interactive is None:
        interactive = definition is not None and definition.interactive is True
    requested = pick("approvals") or (definition.approvals if definition else None)
    approvals = _approvals(problems, at("approvals"), requested, configured, backend)
    idle_ms = _duration(
        problems, at("idleTimeoutMs"), pick("idle_timeout_ms"), DEFAULT_IDLE_TIMEOUT_MS
    )
    permission_ms = _duration(
        problems,
        at("permissionTimeoutMs"),
        pick("permission_timeout_ms"),
        DEFAULT_PERMISSION_TIMEOUT_MS,
    )
    return _Driven(
        interactive=interactive,
        approvals=approvals,
        idle_timeout_ms=idle_ms if interactive else None,
        permission_timeout_ms=permission_ms if approvals is Approvals.CLIENT else None,
    )


def _approvals(
    problems: Problems,
    path: str,
    requested: str | None,
    configured: str | None,
    backend: str,
) -> Approvals:
    """The request's (or definition's) approvals, checked; else the configured default,
    which is not applied (a warning says so) to a child that cannot take it: a default
    meant for every child does not refuse the ones whose CLI cannot ask."""
    wanted = requested or configured or Approvals.CLI
    approvals = member(Approvals, wanted)
    if approvals is None:
        problems.error(
            "invalid-approvals",
            f"approvals must be one of {', '.join(Approvals)}, not {wanted!r}",
            path,
        )
        return Approvals.CLI
    why = unsupported(backend, approvals)
    if why is None:
        return approvals
    if requested is not None:
        problems.error(APPROVALS_UNSUPPORTED, why, path)
        return approvals
    problems.warning(
        APPROVALS_UNSUPPORTED,
        f"the configured approvals {approvals.value!r} is not applied to this {backend} "
        f"child: {why}",
        path,
    )
    return Approvals.CLI


def _agent(
    problems: Problems, path: str, name: str | None, sources: AgentSources
) -> AgentDefinition | None:
    """The definition an `agent` item names; a diagnostic when there is none to use."""
    if name is None:
        return None
    # The configured lists first: a disabled name is refused whatever its definitions.
    if (disabled := sources.settings.agents.disabled_by(name)) is not None:
        problems.error(
            "agent-disabled",
            f"the agent {name!r} is disabled by {disabled.describe()} (see agents/list "
            "with all: true)",
            path,
        )
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


# What a request or an agent definition may ask of a CLI that an ACP agent decides for
# itself (protocol.md §24.1): wire names, by field.
ACP_OWN_FIELDS: Final = {
    "model": "model",
    "thinking": "thinking",
    "tools": "tools",
    "session_resources": "sessionResources",
}


def _check_own_choices(
    problems: Problems,
    at: Callable[[str], str],
    pick: Callable[[str], Any],
    definition: AgentDefinition | None,
    backend: Backend,
) -> None:
    """A child of an agent that configures itself (an ACP agent's): what it chooses itself
    is not asked of it (a configured default for CLIs is not applied to it, and is not an
    error)."""
    defined = {
        "model": definition.model if definition is not None else None,
        "thinking": definition.effort if definition is not None else None,
        "tools": definition.tools if definition is not None else None,
        "session_resources": definition.session_resources if definition is not None else None,
    }
    for field, wire_name in ACP_OWN_FIELDS.items():
        if pick(field) is not None or defined[field] is not None:
            problems.error(
                "not-honoured",
                f"the {backend.id} backend is an ACP agent, which chooses its own "
                f"{wire_name} (set it in the agent's own configuration or arguments)",
                at(wire_name),
            )


def _budget_backend(name: str, backend: Backend | None) -> str | None:
    """Whose budgets a child's are (budgets.py `unreported`): its backend's, or its
    protocol's (every ACP agent's the same); None for a command child, or one whose
    backend is unknown."""
    if backend is None or name == "command":
        return None
    return backend.protocol or name


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
    item: SpawnItem,
    call: LaunchRequest,
    defined: str | None,
    default_backend: str | None,
    model: str | None,
) -> str:
    """Explicit backend wins; a command means `command`; then the agent definition's
    `backend`; then the configured default; then a bare claude-* model means claude; else pi."""
    explicit = item.backend or call.backend
    if explicit:
        return explicit
    if item.command is not None:
        return "command"
    if defined is not None:
        return defined
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


def _tokens(problems: Problems, path: str, value: int | None) -> int | None:
    if value is not None and not 1 <= value <= MAX_SAFE_INTEGER:
        problems.error("invalid-max-tokens", f"must be 1..{MAX_SAFE_INTEGER} tokens", path)
    return value


def _cost(problems: Problems, path: str, value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        problems.error("invalid-max-cost-usd", "must be a number of US dollars above 0", path)
    return value


@attrs.frozen
class _Budgets:
    """Chooses an agent child's budgets: the request's (an item's over the call's), else
    its definition's, else the configured default; `backend` None: not an agent child."""

    problems: Problems
    at: Callable[[str], str]
    backend: str | None

    def pick(
        self, budget: str, requested: N | None, defined: N | None, configured: N | None
    ) -> N | None:
        if self.backend is None:
            return None  # a command child's request was refused (`not-honoured`) already
        reason = unreported(self.backend, budget)
        chosen = requested if requested is not None else defined
        if chosen is not None and reason is not None:
            self.problems.error(
                NOT_REPORTED[budget], f"{budget} cannot be enforced: {reason}", self.at(budget)
            )
        if chosen is not None:
            return chosen
        if configured is not None and reason is not None:
            # A default meant for every child: this child runs, without it, and is told so.
            self.problems.warning(
                NOT_REPORTED[budget],
                f"the configured {SETTING_NAMES[budget]} is not applied to this "
                f"{self.backend} child: {reason}",
                self.at(budget),
            )
            return None
        return configured


def _isolation(
    problems: Problems, path: str, value: str | None, cwd: str, given: str
) -> Isolation | None:
    """`worktree` needs a git repository around the working directory (found by its `.git`,
    without starting git: planning starts nothing), one the directory as `given` (`cwd`
    is resolved) does not lead out of."""
    if value is None:
        return None
    if value not in ISOLATIONS:
        problems.error(
            "invalid-isolation",
            f"isolation must be one of {', '.join(ISOLATIONS)}, not {value!r}",
            path,
        )
    elif value == WORKTREE and os.path.isdir(cwd):
        if (top := outside_repository(given)) is not None:
            problems.error(
                CWD_OUTSIDE_WORKTREE,
                f"{cwd!r} leads out of its repository {top!r} through a symbolic link, and "
                f"in a {WORKTREE} it would lead out of it too: give the directory it leads to "
                "as cwd, or leave isolation out",
                path,
            )
        elif repository_root(cwd) is None:
            problems.error(
                "not-a-git-repository",
                f"isolation {WORKTREE!r} needs a git repository, and {cwd!r} is in none: "
                "run `git init` there (with a first commit), or leave isolation out",
                path,
            )
    return member(Isolation, value)


def _placement(
    problems: Problems, path: str, value: Placement | None, placeable: bool
) -> Placement | None:
    """A placement needs an executor that places (a cluster) and amounts it can hold."""
    if value is None:
        return None
    if not placeable:
        problems.error(
            "placement-not-supported",
            "placement needs a cluster executor (`--executor ray`): this server runs "
            "every child on its own machine",
            path,
        )
    for name, amount in (value.resources or {}).items():
        if not name or not math.isfinite(amount) or amount <= 0:
            problems.error(
                "invalid-placement",
                f"resource {name!r} needs a name and a positive amount, not {amount!r}",
                f"{path}.resources",
            )
    if value.node_id is not None and not value.node_id:
        problems.error("invalid-placement", "nodeId must not be empty", f"{path}.nodeId")
    return value


def given_directory(value: str | None, default: str) -> str:
    """The working directory as the request wrote it (`~` expanded), not resolved."""
    return os.path.expanduser(value) if value is not None else default


def directory(problems: Problems, path: str, value: str | None, default: str) -> str:
    given = given_directory(value, default)
    try:
        real = os.path.realpath(given)
    except OSError as exc:  # a link on the way whose target may not be read
        problems.error("invalid-cwd", f"{value!r} cannot be examined: {exc.strerror}", path)
        return os.path.abspath(given)
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
