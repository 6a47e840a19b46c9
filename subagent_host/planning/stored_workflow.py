"""A workflow's definition as the store keeps it: its plan, without environment values.

The store holds the JSON text; this module is the one place that knows its
shape (versioned, so a later server can refuse what it cannot read). A resume
of a workflow child reads it back to run the steps after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from subagent_host.planning.plan import RunPlan
from subagent_host.planning.record_form import RECORDS

# A workflow's definition: its plan with item templates, whose environment
# values are left out (only the names are kept: values may be secrets).
WORKFLOW_RECORD_VERSION: Final = 1


def workflow_record(plan: RunPlan) -> dict[str, Any]:
    # As a RunPlan: a LaunchPlan's normalized view and fingerprint are no part of it.
    record: dict[str, Any] = RECORDS.unstructure(plan, RunPlan)
    for child, stored in zip(plan.children, record["children"], strict=True):
        stored.pop("launch", None)  # derived from the rest, and holds env values
        stored.pop("env", None)
        stored["env_keys"] = sorted(child.env)
    for step in record.get("workflow", {}).get("steps", ()):
        # A step's index is its place in the list, as records of every version keep
        # it: left out, so that a record (and its digest) is what it always was.
        del step["index"]
    return {"v": WORKFLOW_RECORD_VERSION, "plan": record}


def workflow_env_keys(record: Mapping[str, Any]) -> list[list[str]]:
    """Each item template's environment variable names."""
    return [list(child.get("env_keys", ())) for child in record["plan"]["children"]]


def workflow_from_record(record: Mapping[str, Any]) -> RunPlan:
    """The plan back, each template's environment empty (ValueError if it cannot be read)."""
    if record.get("v") != WORKFLOW_RECORD_VERSION:
        raise ValueError(f"workflow record version {record.get('v')!r}")
    plan = dict(record["plan"])
    plan["children"] = [
        {k: v for k, v in child.items() if k != "env_keys"} for child in plan["children"]
    ]
    try:
        if "workflow" in plan:  # each step's index again: its place in the list
            steps = enumerate(plan["workflow"]["steps"])
            plan["workflow"] = {
                **plan["workflow"],
                "steps": [{**step, "index": index} for index, step in steps],
            }
        return RECORDS.structure(plan, RunPlan)
    except Exception as exc:  # noqa: BLE001 - any shape problem means "unreadable"
        raise ValueError(f"unreadable workflow record ({type(exc).__name__})") from None
