"""Check a launch request and plan it: defaults applied, every problem found at once.

`spawn` and `preflight` both call `check_spawn`. What the wire types cannot
say is checked here: which of the request's shapes was used, item counts, the
mode, the requested access and required limits; each item is resolved by
`items.py`, a workflow's steps by `workflow.py`. Problems become diagnostics
(`problems.py`); any error among them rejects the launch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from subagent_host.backends.base import Backend
from subagent_host.planning.access import (
    FILESYSTEM_LEVELS,
    Negotiated,
    is_full,
    negotiate,
    unpermitted_effects,
)
from subagent_host.planning.approvals import host_answered
from subagent_host.planning.items import (
    AgentSources,
    ItemResolver,
    definition_named,
    directory,
)
from subagent_host.planning.plan import ChildPlan, LaunchPlan, RunPlan, ServerLimits, WorkflowPlan
from subagent_host.planning.prepare import launch_plan
from subagent_host.planning.problems import Problems, raise_if_rejected
from subagent_host.planning.receipts import CHILD_LIMITS, HOST_HARD, receipts
from subagent_host.planning.request import (
    RAW_STREAM,
    AccessRequest,
    FilesystemAccess,
    LaunchRequest,
    ParallelStep,
    SpawnItem,
)
from subagent_host.planning.snapshot_path import NO_SERVER_FILES, ServerFiles
from subagent_host.planning.views import Access
from subagent_host.planning.workflow import plan_workflow
from subagent_host.values import BACKGROUND_MODE, MODES, TASK_MODE, RunKind
from subagent_host.values.choices import Approvals, member
from subagent_host.values.facts import Diagnostic
from subagent_host.values.plurals import between

MAX_CHAIN_ITEMS: Final = 32
ACCESS_NOT_ENFORCEABLE: Final = "access-not-enforceable"


@attrs.frozen
class ResolvedSpawn:
    plan: LaunchPlan
    mode: str
    background: tuple[int, ...] = ()
    """A mixed `tasks` run's members that run in the background (`CheckedSpawn.background`)."""


@attrs.frozen
class CheckedSpawn:
    """A request checked: the plan when one could be made, and every problem found."""

    plan: LaunchPlan | None
    mode: str
    """How the request is answered: `task` when it waits for any member, else `background`."""
    diagnostics: tuple[Diagnostic, ...]
    background: tuple[int, ...] = ()
    """The members of a mixed `tasks` run (some resolved `task`, some `background`) that
    run in the background: the answer waits for the others only. Empty when every
    member resolved the same mode (the run answers as one, in `mode`)."""
    interactive: tuple[str, ...] = ()
    """The `interactive` fields (paths, as the request's `interactive` or the item's) of
    its interactive children: a request with `mode: "task"` cannot wait for them
    (refused as invalid params by the method)."""

    @property
    def accepted(self) -> bool:
        return self.plan is not None and not any(d.severity == "error" for d in self.diagnostics)


def uses_agents(params: LaunchRequest) -> bool:
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


def resolve_or_reject(checked: CheckedSpawn) -> ResolvedSpawn:
    """The launch to run; raises LaunchRejected / BackendUnavailable when it has an error."""
    raise_if_rejected(checked.diagnostics)
    assert checked.plan is not None
    return ResolvedSpawn(plan=checked.plan, mode=checked.mode, background=checked.background)


def check_spawn(
    params: LaunchRequest,
    *,
    backends: Mapping[str, Backend],
    limits: ServerLimits,
    depth: int,
    server_cwd: str,
    sources: AgentSources | None = None,
    server_files: ServerFiles = NO_SERVER_FILES,
) -> CheckedSpawn:
    """Every problem of a launch request as diagnostics, and its plan when one can be made.

    `server_files` are the server's own (state directory, log file): no snapshot goes there.
    """
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

    items = ItemResolver(problems, params, backends, server_cwd, sources)
    resolve = items.resolve

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
        cwd = directory(Problems(), "cwd", params.cwd, server_cwd)  # reported by the items
        children, workflow = plan_workflow(
            problems, params.workflow, items, cwd, limits.max_parallel, server_files
        )
    elif single:
        top = SpawnItem(prompt=params.prompt, agent=params.agent, command=params.command)
        children = (resolve("", top),)

    mode, background = _modes(problems, params, sources, children)
    access = _access(problems, params.access)
    interactive = tuple(items.interactive)
    if problems.failed or not children:
        return CheckedSpawn(
            plan=None,
            mode=mode,
            diagnostics=tuple(problems.items),
            background=background,
            interactive=interactive,
        )
    plan = RunPlan(
        kind=kind,
        children=children,
        label=params.label,
        stream=params.stream is not None and params.stream is not False,
        raw_output=params.stream == RAW_STREAM,
        access=None if is_full(access) else access,
        workflow=workflow,
        egress_consent=params.egress_consent is True,
    )
    _check_access(problems, plan, backends, access)
    _check_required_limits(problems, plan, backends, access, limits, params.required_limits)
    if not is_full(access):  # the children are launched with the tools access leaves them
        plan = attrs.evolve(
            plan,
            children=tuple(_narrowed(child, backends, access) for child in plan.children),
        )
    prepared = launch_plan(plan, backends)
    return CheckedSpawn(
        plan=prepared,
        mode=mode,
        diagnostics=tuple(problems.items),
        background=background,
        interactive=interactive,
    )


def _modes(
    problems: Problems,
    params: LaunchRequest,
    sources: AgentSources,
    children: tuple[ChildPlan, ...],
) -> tuple[str, tuple[int, ...]]:
    """How the request is answered, and the members of a mixed `tasks` run that run in
    the background (protocol.md §8.5).

    The request's `mode` decides for every member. Without it, a single agent and
    each member of `tasks` resolve on their own: its agent definition's
    `subagent_mode`, else the configured `default_mode`, else `background`. A chain
    or a workflow runs its members one after another and answers as one: the
    configured `default_mode`, else `background`. An interactive child runs in the
    background whatever its definition or the configuration say (it ends when it is
    closed, not when its task is done), and so does a chain or a workflow with one.
    """
    if params.mode is not None:
        return _valid(problems, params.mode), ()
    if params.tasks is not None:  # its children are its members, in order
        members = [
            BACKGROUND_MODE if child.interactive else _member_mode(sources, item.agent)
            for item, child in zip(params.tasks, children, strict=True)
        ]
    elif any(child.interactive for child in children):
        members = [BACKGROUND_MODE]
    else:
        members = [_member_mode(sources, params.agent)]
    if len(set(members)) == 1:
        return _valid(problems, members[0]), ()
    return TASK_MODE, tuple(i for i, mode in enumerate(members) if mode == BACKGROUND_MODE)


def _member_mode(sources: AgentSources, agent: str | None) -> str:
    """One member's own mode: its definition's `subagent_mode`, else `default_mode`."""
    definition = definition_named(sources, agent) if agent is not None else None
    own = definition.mode if definition is not None else None
    return own or sources.settings.default_mode or BACKGROUND_MODE


def _valid(problems: Problems, mode: str) -> str:
    if mode not in MODES:
        problems.error("invalid-mode", f"mode must be one of {', '.join(sorted(MODES))}", "mode")
    return mode


def _narrowed(child: ChildPlan, backends: Mapping[str, Backend], access: Access) -> ChildPlan:
    backend = backends[child.backend]
    if not backend.restrictable:
        # Nothing of its tools is removed; an accepted access still decides the answers
        # the host gives its permission requests (an ACP agent's under `policy`).
        return attrs.evolve(child, access=access)
    tools = negotiate(
        backend, child.tools, access, answered=host_answered(backend, child.approvals)
    )
    return attrs.evolve(
        child, tools=tuple(tools.kept), removed_tools=tuple(tools.removed), access=access
    )


def _access(problems: Problems, requested: AccessRequest | None) -> Access:
    if requested is None:
        return Access()
    filesystem = member(FilesystemAccess, requested.filesystem or FilesystemAccess.WRITE)
    if filesystem is None:
        problems.error(
            "invalid-access",
            f"filesystem must be one of {', '.join(FILESYSTEM_LEVELS)}",
            "access.filesystem",
        )
        filesystem = FilesystemAccess.WRITE
    return Access(
        filesystem=filesystem,
        process=requested.process if requested.process is not None else True,
        network=requested.network if requested.network is not None else True,
    )


def _check_access(
    problems: Problems, plan: RunPlan, backends: Mapping[str, Backend], access: Access
) -> None:
    """A child left with no tool, or whose backend cannot be narrowed, cannot honour access."""
    if is_full(access):
        return
    for index, child in enumerate(plan.children):
        backend = backends[child.backend]
        answered = host_answered(backend, child.approvals)
        tools = negotiate(backend, child.tools, access, answered=answered)
        path = f"children[{index}]" if len(plan.children) > 1 else None
        if not backend.restrictable and tools.removed:
            problems.error(ACCESS_NOT_ENFORCEABLE, _not_enforceable(child, backend, tools), path)
        elif not tools.kept:
            problems.error(
                "no-tools-left", "the requested access removes every tool of this child", path
            )
        elif tools.removed:
            exceeding = unpermitted_effects(access, tools.removed)
            removed = ", ".join(f"{n} ({', '.join(exceeding[n])})" for n in sorted(exceeding))
            problems.info("tools-removed", f"removed for the requested access: {removed}", path)


def _not_enforceable(child: ChildPlan, backend: Backend, tools: Negotiated) -> str:
    """Why `access` cannot hold for a child whose tools cannot be narrowed."""
    if not backend.configures_itself:
        return (
            f"the {child.backend} backend runs a program with your own permissions; "
            "it cannot be limited to the requested access (drop `access`, or use an "
            "agent backend whose tools can be narrowed)"
        )
    if child.approvals is not Approvals.POLICY:
        return (
            f"the {child.backend} ACP agent's tools are its own and cannot be narrowed, and "
            f"with approvals {child.approvals.value!r} nothing answers its permission "
            'requests from access: use approvals "policy" (the server then rejects each '
            "edit and command beyond access), or drop `access`"
        )
    unasked = ", ".join(sorted(tools.removed))
    return (
        f"the {child.backend} ACP agent runs its {unasked} tools without asking, and they "
        "may do what the requested access does not permit (widen `access`, or drop it)"
    )


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
        limit.name: limit.enforcement for limit in receipts(plan, backends, access, limits).limits
    }
    for index, name in enumerate(required):
        enforcement = offered.get(name)
        of = CHILD_LIMITS[name][0] if name in CHILD_LIMITS else None
        unlimited = [i for i, c in enumerate(plan.children) if of is not None and of(c) is None]
        if enforcement is not None and unlimited:
            problems.error(
                "limit-not-offered",
                f"{name} is not set for every child (none for children "
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
        problems.error("item-count", f"{name} takes {between(1, most, 'item')}, not {count}", name)
