"""Any workflow a client can send is either refused with diagnostics or planned: never a crash.

Hypothesis builds workflows from the real vocabulary (steps of every kind, items,
templates with known and unknown placeholders, output names, odd counts), so the
checks meet combinations no example test lists. About one object in forty is spoilt
on the wire (an unknown field, a value of the wrong type, a field left out), so the
-32602 path is fuzzed as well: every problem it lists must name a real place.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subagent_host.backends.base import Backend
from subagent_host.backends.command import CommandBackend
from subagent_host.planning.check import check_spawn
from subagent_host.planning.normalized import normalized_plan
from subagent_host.planning.views import to_json
from subagent_host.rpc.codes import INVALID_PARAMS
from subagent_host.rpc.dispatch import make_protocol
from subagent_host.rpc.errors import InvalidParams, error_for_exception
from subagent_host.rpc.wire import SpawnParams
from tests.planning.conftest import LIMITS

PROTOCOL = make_protocol()
BACKENDS: dict[str, Backend] = {"command": CommandBackend()}

wrong_values = st.sampled_from([None, 7, -1, 2.5, True, "x", [], [1], {}, {"k": 1}])


@st.composite
def sometimes_spoilt(draw: st.DrawFn, objects: st.SearchStrategy[dict[str, Any]]) -> Any:
    """An object as drawn, or (about one time in forty) with one wire mistake in it."""
    value = dict(draw(objects))
    if draw(st.integers(0, 39)) != 39:  # not 0: Hypothesis draws its bounds often
        return value
    mistake = draw(st.sampled_from(["unknown field", "wrong type", "left out"]))
    if mistake == "unknown field" or not value:
        value[draw(st.sampled_from(["bogus", "timeout_ms", "As"]))] = 1
    elif mistake == "wrong type":
        value[draw(st.sampled_from(sorted(value)))] = draw(wrong_values)
    else:
        del value[draw(st.sampled_from(sorted(value)))]
    return value


names = st.sampled_from(["a", "b", "plan", "x-1", "bad name", ""])
placeholders = st.sampled_from(
    ["{task}", "{previous}", "{item}", "{index}", "{outputs.a}", "{outputs.plan}", "{nope}",
     '{"json": 1}', "{ spaced }", "{}", "plain"]
)  # fmt: skip
templates = st.lists(placeholders, max_size=3).map(" ".join)
items = sometimes_spoilt(
    st.fixed_dictionaries(
        {"command": st.lists(templates, min_size=0, max_size=3).map(lambda a: ["echo", *a])},
        optional={"as": names, "label": templates, "prompt": templates},
    )
)
steps = st.one_of(
    items,
    sometimes_spoilt(
        st.fixed_dictionaries(
            {"parallel": st.lists(items, max_size=9)}, optional={"as": names, "label": templates}
        )
    ),
    sometimes_spoilt(
        st.fixed_dictionaries(
            {"forEach": templates, "item": items}, optional={"as": names, "label": templates}
        )
    ),
)
workflows = sometimes_spoilt(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["w", "", " "]), "task": templates, "chain": st.lists(steps)},
    )
)

PATH_PARTS = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def names_a_place(raw: Any, path: str, message: str) -> bool:
    """Whether a camelCase path (`workflow.chain[0].item.as`) leads somewhere in `raw`.

    A field reported missing must be absent from an object that is there.
    """
    parts = PATH_PARTS.findall(path)
    if not path or "".join(f"[{i}]" if i else f".{n}" for i, n in parts).lstrip(".") != path:
        return False
    node = raw
    for depth, (index, name) in enumerate(parts):
        if index:
            if not isinstance(node, list) or int(index) >= len(node):
                return False
            node = node[int(index)]
        elif not isinstance(node, dict):
            return False
        elif name not in node:
            return depth == len(parts) - 1 and message == "required field missing"
        else:
            node = node[name]
    return message != "required field missing"


def assert_refused_on_the_wire(raw: dict[str, Any], refusal: InvalidParams) -> None:
    """The refusal is a -32602 whose every problem says what is wrong, and where."""
    error = PROTOCOL.converter.unstructure(error_for_exception(refusal))  # as dispatch writes it
    assert error["code"] == INVALID_PARAMS, raw
    assert error["message"].startswith("invalid params: "), error
    problems = error["data"]["errors"]
    assert problems, raw
    for problem in problems:
        assert set(problem) == {"path", "message"}, problem
        assert problem["message"].strip(), (raw, problem)
        assert names_a_place(raw, problem["path"], problem["message"]), (raw, problem)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workflow=workflows)
def test_a_workflow_is_refused_with_diagnostics_or_planned(
    workflow: dict[str, Any], tmp_path_factory: Any
) -> None:
    raw = {"workflow": workflow}
    try:
        params = PROTOCOL.structure_params(raw, SpawnParams)
    except InvalidParams as refusal:  # anything else raised is a crash, and fails the test
        assert_refused_on_the_wire(raw, refusal)
        return
    cwd = str(Path(tmp_path_factory.getbasetemp()))
    checked = check_spawn(params, backends=BACKENDS, limits=LIMITS, depth=0, server_cwd=cwd)
    if checked.accepted:
        assert checked.plan is not None and checked.plan.workflow is not None
        assert len(checked.plan.workflow.steps) == len(workflow["chain"])
        to_json(normalized_plan(checked.plan, BACKENDS))  # the plan can be shown and fingerprinted
    else:
        assert any(d.severity == "error" for d in checked.diagnostics), raw
        assert all(d.code and d.message for d in checked.diagnostics)
