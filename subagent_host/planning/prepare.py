"""Prepare a checked plan once: each child's launch, then the views computed from them.

`check_spawn` ends here. Each child's backend renders its argv, stdin, extra
environment and working directory exactly once; the normalized plan (what
preflight shows) and its fingerprint are computed from those launches, so the
fingerprint a preflight id is bound to, the one the run records and the argv
that is started are one rendering, not several that must agree.

A `chain` child whose prompt holds `{previous}` and a workflow child whose
templates are filled when its step starts can only be rendered for real then:
the plan holds the template's launch, and the start renders again only when the
filled text differs (`runs/child_runner.py`, `runs/workflow_runner.py`).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from subagent_host.backends.base import Backend
from subagent_host.planning.normalized import normalized_plan, plan_fingerprint
from subagent_host.planning.plan import LaunchPlan, RunPlan, prepare_child


def launch_plan(plan: RunPlan, backends: Mapping[str, Backend]) -> LaunchPlan:
    """The plan with every child's launch prepared, its normalized view and fingerprint."""
    children = tuple(prepare_child(child, backends[child.backend]) for child in plan.children)
    ready = attrs.evolve(plan, children=children)
    normalized = normalized_plan(ready, backends, plan.access)
    # Every field of the plan as it is: none can be left behind when RunPlan grows one.
    fields = {field.name: getattr(ready, field.name) for field in attrs.fields(RunPlan)}
    return LaunchPlan(**fields, normalized=normalized, fingerprint=plan_fingerprint(normalized))
