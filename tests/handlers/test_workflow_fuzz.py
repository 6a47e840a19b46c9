"""Any workflow a client can send is either refused with diagnostics or planned: never a crash.

Hypothesis builds workflows from the real vocabulary (steps of every kind, items,
templates with known and unknown placeholders, output names, odd counts), so the
checks meet combinations no example test lists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subagent_host.backends.base import Backend
from subagent_host.backends.command import CommandBackend
from subagent_host.handlers.spawn_plan import check_spawn
from subagent_host.rpc.errors import param_problems
from subagent_host.rpc.wire import SpawnParams, make_converter
from subagent_host.runs.plans import normalized_plan
from tests.handlers.conftest import LIMITS

CONVERTER = make_converter()
BACKENDS: dict[str, Backend] = {"command": CommandBackend()}

names = st.sampled_from(["a", "b", "plan", "x-1", "bad name", ""])
placeholders = st.sampled_from(
    ["{task}", "{previous}", "{item}", "{index}", "{outputs.a}", "{outputs.plan}", "{nope}",
     '{"json": 1}', "{ spaced }", "{}", "plain"]
)  # fmt: skip
templates = st.lists(placeholders, max_size=3).map(" ".join)
items = st.fixed_dictionaries(
    {"command": st.lists(templates, min_size=0, max_size=3).map(lambda a: ["echo", *a])},
    optional={"as": names, "label": templates, "prompt": templates},
)
steps = st.one_of(
    items,
    st.fixed_dictionaries(
        {"parallel": st.lists(items, max_size=9)}, optional={"as": names, "label": templates}
    ),
    st.fixed_dictionaries(
        {"forEach": templates, "item": items}, optional={"as": names, "label": templates}
    ),
)
workflows = st.fixed_dictionaries(
    {"name": st.sampled_from(["w", "", " "]), "task": templates, "chain": st.lists(steps)},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workflow=workflows)
def test_a_workflow_is_refused_with_diagnostics_or_planned(
    workflow: dict[str, Any], tmp_path_factory: Any
) -> None:
    raw = {"workflow": workflow}
    try:
        params = CONVERTER.structure(raw, SpawnParams)
    except Exception as exc:  # noqa: BLE001 - the wire refuses it: -32602 with paths
        assert param_problems(exc), raw
        return
    cwd = str(Path(tmp_path_factory.getbasetemp()))
    checked = check_spawn(params, backends=BACKENDS, limits=LIMITS, depth=0, server_cwd=cwd)
    if checked.accepted:
        assert checked.plan is not None and checked.plan.workflow is not None
        assert len(checked.plan.workflow.steps) == len(workflow["chain"])
        normalized_plan(checked.plan, BACKENDS)  # the plan can be shown and fingerprinted
    else:
        assert any(d.severity == "error" for d in checked.diagnostics), raw
        assert all(d.code and d.message for d in checked.diagnostics)
