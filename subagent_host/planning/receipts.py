"""Receipts: honest statements of what a launch's children may do and how its limits hold.

Receipts are statements, not promises: `access` says children run with the
user's own OS permissions (`shared-user`) and which tools, with which effects,
they get; `limits` says which limits the server enforces by ending the process
tree (`host-hard`) and which it only asks for (`best-effort`). A limit the
server counts itself from a CLI's events (`maxTurns`) is `host-hard` for every
CLI, even where the CLI is also told (claude's `--max-turns`). `egress` says
what leaves the machine whatever the tools are (`egress.py`): `network` in
`access` and a tool's effects are about the tools, not an agent CLI's own
connection to its model provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from subagent_host.backends.base import Backend
from subagent_host.planning.access import beyond, negotiate
from subagent_host.planning.egress import declared_egress
from subagent_host.planning.plan import RunPlan, ServerLimits
from subagent_host.planning.views import (
    Access,
    AccessReceipt,
    ChildReceipt,
    LimitReceipt,
    Receipts,
    RemovedTool,
    ToolEffects,
)

EXECUTION_BOUNDARY: Final = "shared-user"
HOST_HARD: Final = "host-hard"
BEST_EFFORT: Final = "best-effort"


def receipts(
    plan: RunPlan, backends: Mapping[str, Backend], access: Access, server: ServerLimits
) -> Receipts:
    """What the children may do, and how each limit is enforced."""
    children = []
    for index, child in enumerate(plan.children):
        backend = backends[child.backend]
        tools = negotiate(backend, child.tools, access, child.removed_tools)
        exceeding = beyond(access, tools.removed)
        children.append(
            ChildReceipt(
                index=index,
                backend=child.backend,
                tools=tuple(ToolEffects(n, tuple(e)) for n, e in sorted(tools.kept.items())),
                # Each removed tool with the effects that took it out: what `access`
                # did not permit.
                removed_tools=tuple(
                    RemovedTool(name, tuple(e), tuple(exceeding[name]))
                    for name, e in sorted(tools.removed.items())
                ),
                effects=tuple(sorted({e for kept in tools.kept.values() for e in kept})),
                restrictable=backend.restrictable,
                session_resources=child.session_resources,
                isolation=child.isolation,
                egress=declared_egress(child.backend),
            )
        )
    return Receipts(
        access=AccessReceipt(execution_boundary=EXECUTION_BOUNDARY, children=tuple(children)),
        limits=_limits(plan, server),
    )


def _limits(plan: RunPlan, server: ServerLimits) -> tuple[LimitReceipt, ...]:
    timeouts = [child.timeout_ms for child in plan.children]
    stalls = [child.stall_timeout_ms for child in plan.children]
    limits = [
        LimitReceipt(
            "timeoutMs", max(timeouts), HOST_HARD, "the tree is ended when it runs longer"
        ),
        LimitReceipt(
            "stallTimeoutMs", max(stalls), HOST_HARD, "the tree is ended after this long silent"
        ),
        LimitReceipt(
            "outputCapBytes", server.output_cap_bytes, HOST_HARD, "output kept beyond it is cut"
        ),
        LimitReceipt("outputCapLines", server.output_cap_lines, HOST_HARD, "as outputCapBytes"),
        LimitReceipt(
            "previousCapBytes", server.previous_cap_bytes, HOST_HARD, "{previous} is cut to it"
        ),
        LimitReceipt(
            "maxConcurrency", server.max_concurrency, HOST_HARD, "children beyond it wait queued"
        ),
        LimitReceipt("maxDepth", server.max_depth, HOST_HARD, "a child's own spawns are refused"),
    ]
    turns = [child.max_turns for child in plan.children if child.max_turns is not None]
    if turns:
        limits.append(
            LimitReceipt(
                "maxTurns",
                max(turns),
                HOST_HARD,
                "the server counts each model response from the CLI's events and ends the "
                "tree when response N + 1 begins (claude also gets --max-turns)",
            )
        )
    if plan.workflow is not None:
        limits.append(
            LimitReceipt(
                "workflowParallelism",
                server.workflow_parallelism,
                HOST_HARD,
                "children of a step beyond it wait queued",
            )
        )
    return tuple(limits)
