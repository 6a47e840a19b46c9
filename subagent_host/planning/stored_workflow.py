"""A workflow's definition as the store keeps it: its plan, without environment values.

The store holds the JSON text; this module is the one place that knows its
shape (versioned, so a later server can refuse what it cannot read). A resume
of a workflow child reads it back to run the steps after it.
"""

from __future__ import annotations

from typing import Final

from subagent_host.planning.plan import ChildPlan, RunPlan
from subagent_host.planning.record_form import RECORDS
from subagent_host.values.json_values import JsonObject, JsonValue

# A workflow's definition: its plan with item templates, whose environment
# values are left out (only the names are kept: values may be secrets).
WORKFLOW_RECORD_VERSION: Final = 1


def workflow_record(plan: RunPlan) -> JsonObject:
    # As a RunPlan: a LaunchPlan's normalized view and fingerprint are no part of it.
    record: JsonObject = RECORDS.unstructure(plan, RunPlan)
    record["children"] = [_template_record(child) for child in plan.children]
    workflow = record.get("workflow")
    steps = workflow.get("steps") if isinstance(workflow, dict) else None
    for step in steps if isinstance(steps, list) else ():
        # A step's index is its place in the list, as records of every version keep
        # it: left out, so that a record (and its digest) is what it always was.
        if isinstance(step, dict):
            del step["index"]
    return {"v": WORKFLOW_RECORD_VERSION, "plan": record}


def _template_record(child: ChildPlan) -> JsonObject:
    stored: JsonObject = RECORDS.unstructure(child, ChildPlan)
    stored.pop("launch", None)  # derived from the rest, and holds env values
    stored.pop("env", None)
    stored["env_keys"] = [*sorted(child.env)]
    return stored


def workflow_env_keys(record: JsonObject) -> list[list[str]]:
    """Each item template's environment variable names."""
    _, templates = _plan(record)
    keys = [template.get("env_keys", []) for template in templates]
    return [
        [k for k in names if isinstance(k, str)] if isinstance(names, list) else []
        for names in keys
    ]


def workflow_from_record(record: JsonObject) -> RunPlan:
    """The plan back, each template's environment empty (ValueError if it cannot be read)."""
    if record.get("v") != WORKFLOW_RECORD_VERSION:
        raise ValueError(f"workflow record version {record.get('v')!r}")
    plan, templates = _plan(record)
    children: list[JsonValue] = [
        {k: v for k, v in template.items() if k != "env_keys"} for template in templates
    ]
    try:
        restored: JsonObject = {**plan, "children": children}
        if "workflow" in plan:
            restored["workflow"] = _indexed_steps(plan["workflow"])
        return RECORDS.structure(restored, RunPlan)
    except Exception as exc:  # noqa: BLE001 - any shape problem means "unreadable"
        raise ValueError(f"unreadable workflow record ({type(exc).__name__})") from None


def _indexed_steps(workflow: JsonValue) -> JsonValue:
    """The workflow with each step's index again: its place in the list."""
    if not isinstance(workflow, dict):
        return workflow  # for the converter to refuse
    steps = workflow.get("steps")
    if not isinstance(steps, list):
        return workflow
    indexed = [
        {**step, "index": i} if isinstance(step, dict) else step for i, step in enumerate(steps)
    ]
    return {**workflow, "steps": indexed}


def _plan(record: JsonObject) -> tuple[JsonObject, list[JsonObject]]:
    """The record's plan and its item templates (ValueError unless the plan is an object
    whose `children` are an array of objects)."""
    plan = record.get("plan")
    children = plan.get("children") if isinstance(plan, dict) else None
    if not isinstance(plan, dict) or not isinstance(children, list):
        raise ValueError("unreadable workflow record (it holds no plan of item templates)")
    templates = [child for child in children if isinstance(child, dict)]
    if len(templates) != len(children):
        raise ValueError("unreadable workflow record (an item template is not an object)")
    return plan, templates
