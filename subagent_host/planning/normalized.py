"""The normalized plan: what a launch would run, as `preflight` shows it and a fingerprint seals it.

Both `preflight` and `spawn` fingerprint it (`sha256:v1:` + SHA-256 of its
canonical JSON), so a spawn matches its preflight exactly when it would run the
same thing. Each child's argv is its prepared launch's (`prepare.py`): the plan
shows what would be executed, not a second rendering of it. Environment values
are left out (only their names): they may be secrets.
"""

from __future__ import annotations

from collections.abc import Mapping

from subagent_host.backends.base import Backend
from subagent_host.planning.access import is_full, negotiate
from subagent_host.planning.approvals import host_answered
from subagent_host.planning.fingerprint import digest, fingerprint
from subagent_host.planning.plan import RunPlan, WorkflowPlan, driving, prepared
from subagent_host.planning.views import (
    Access,
    NormalizedPlan,
    PlanChild,
    PlannedPlacement,
    PlanWorkflow,
    to_json,
)
from subagent_host.values.copying import shared


def normalized_plan(
    plan: RunPlan, backends: Mapping[str, Backend], access: Access | None = None
) -> NormalizedPlan:
    """The plan as preflight shows it."""
    access = access or Access()
    children = []
    for index, child in enumerate(plan.children):
        backend = backends[child.backend]
        answered = host_answered(backend, child.approvals)
        tools = negotiate(backend, child.tools, access, child.removed_tools, answered)
        children.append(
            shared(
                PlanChild,
                child,
                index=index,
                argv=prepared(child, backend).argv,
                tools=tuple(sorted(tools.kept)),
                env_keys=tuple(sorted(child.env)),
                prompt_digest=digest(child.prompt) if child.prompt is not None else None,
                limits=child.limits,
                removed_tools=tuple(sorted(tools.removed)) if tools.removed else None,
                placement=PlannedPlacement.of(child.placement),
                redact=None if child.redact else False,
                **driving(child),
            )
        )
    return NormalizedPlan(
        kind=plan.kind,
        children=tuple(children),
        access=None if is_full(access) else access,
        workflow=_workflow(plan.workflow) if plan.workflow is not None else None,
        egress_consent=True if plan.egress_consent else None,
    )


def _workflow(workflow: WorkflowPlan) -> PlanWorkflow:
    """The workflow's shape: steps refer to `children` (item templates) by index. Its
    steps are the plan's own: a planned step is one type (`PlanStep`)."""
    return shared(PlanWorkflow, workflow, task_digest=digest(workflow.task))


def plan_fingerprint(plan: NormalizedPlan) -> str:
    """The plan's fingerprint: what a preflight id and a run are bound to."""
    return fingerprint(to_json(plan))
