"""Receipts: honest statements of what a launch's children may do and how its limits hold.

Receipts are statements, not promises: `access` says children run with the
user's own OS permissions (`shared-user`) and which tools, with which effects,
they get; `limits` says which limits the server enforces by ending the process
tree (`host-hard`) and which it only asks for (`best-effort`). A limit the
server counts itself from a CLI's events (`maxTurns`, `maxTokens`, `maxCostUsd`) is
`host-hard` for every CLI it is accepted for, even where the CLI is also told
(claude's `--max-turns`). `egress` says what leaves the machine whatever the tools
are (`egress.py`): `network` in `access` and a tool's effects are about the tools,
not an agent CLI's own connection to its model provider. `approvals`, for a child whose
permissions someone answers (`client`, `policy`), says for each effect whether its CLI
asks before every use (`host-hard`) or some tool uses it unasked (`best-effort`,
`approvals.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from subagent_host.backends.base import Backend
from subagent_host.backends.budgets import MAX_COST_USD, MAX_TOKENS
from subagent_host.planning.access import negotiate, unpermitted_effects
from subagent_host.planning.approvals import approvals_receipt, host_answered
from subagent_host.planning.egress import declared_egress
from subagent_host.planning.plan import ChildPlan, RunPlan, ServerLimits
from subagent_host.planning.views import (
    Access,
    AccessReceipt,
    ChildReceipt,
    Enforcement,
    ExecutionBoundary,
    LimitReceipt,
    Receipts,
    RemovedTool,
    ToolEffects,
)

# The limits a child may or may not have (absent: none), each counted by the server from
# its CLI's events: how to read it from a child, and how it is enforced.
CHILD_LIMITS: Final[Mapping[str, tuple[Callable[[ChildPlan], float | None], str]]] = {
    "maxTurns": (
        lambda child: child.max_turns,
        "the server counts each model response from the CLI's events and ends the "
        "tree when response N + 1 begins (claude also gets --max-turns)",
    ),
    MAX_TOKENS: (
        lambda child: child.max_tokens,
        "the server sums the input and output tokens the CLI reports with each response "
        "and ends the tree once they reach N",
    ),
    MAX_COST_USD: (
        lambda child: child.max_cost_usd,
        "the server sums the cost the CLI reports with each response and ends the tree "
        "once it reaches N US dollars",
    ),
}
HOST_HARD: Final = Enforcement.HOST_HARD


def receipts(
    plan: RunPlan, backends: Mapping[str, Backend], access: Access, server: ServerLimits
) -> Receipts:
    """What the children may do, and how each limit is enforced."""
    children = []
    for index, child in enumerate(plan.children):
        backend = backends[child.backend]
        answered = host_answered(backend, child.approvals)
        tools = negotiate(backend, child.tools, access, child.removed_tools, answered)
        exceeding = unpermitted_effects(access, tools.removed)
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
                approvals=approvals_receipt(backend, child.approvals, tools.kept),
            )
        )
    return Receipts(
        access=AccessReceipt(
            execution_boundary=ExecutionBoundary.SHARED_USER, children=tuple(children)
        ),
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
    for name, (of, how) in CHILD_LIMITS.items():
        values = [value for child in plan.children if (value := of(child)) is not None]
        if values:
            limits.append(LimitReceipt(name, max(values), HOST_HARD, how))
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
