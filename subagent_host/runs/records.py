"""Runs and children as stored rows: plain JSON-able dicts, and back (schema v1).

The store keeps a run's own fields and each child attempt's fields as JSON
documents beside a few indexed columns; this module is the one place that
knows how a `Run` or `ChildRun` is spelled there. Timestamps are ISO 8601 UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs
import cattrs

from subagent_host.planning.plan import RunPlan
from subagent_host.runs.state import ChildRun, EventLog, Run

_converter = cattrs.Converter(omit_if_default=True)
_converter.register_unstructure_hook(datetime, datetime.isoformat)
_converter.register_structure_hook(datetime, lambda value, _: datetime.fromisoformat(value))
# Never in a record (see _RUN_EXCLUDED); a run read back starts with an empty log.
_converter.register_structure_hook(EventLog, lambda _value, _: EventLog())

# Fields of a Run that are not its own record: children are rows of their own,
# events are rows of their own.
_RUN_EXCLUDED = ("children", "events")


def run_record(run: Run) -> dict[str, Any]:
    # Field by field: unstructuring the whole run would convert up to 10,000
    # events (and every child) only to throw them away, at every write.
    record: dict[str, Any] = {}
    for field in attrs.fields(Run):
        if field.name in _RUN_EXCLUDED:
            continue
        value = getattr(run, field.name)
        if value != field.default:
            record[field.name] = _converter.unstructure(value)
    return record


# Not part of a child's record: a live process handle.
_CHILD_EXCLUDED = ("start_time_probe",)


def child_record(child: ChildRun) -> dict[str, Any]:
    record: dict[str, Any] = _converter.unstructure(child)
    for name in _CHILD_EXCLUDED:
        record.pop(name, None)
    return record


def run_from_record(record: Mapping[str, Any], children: list[ChildRun]) -> Run:
    fields = {k: v for k, v in record.items() if k not in _RUN_EXCLUDED}
    run = _converter.structure({**fields, "children": []}, Run)
    run.children = children
    return run


def child_from_record(record: Mapping[str, Any]) -> ChildRun:
    return _converter.structure(dict(record), ChildRun)


# A workflow's definition: its plan with item templates, whose environment
# values are left out (only the names are kept: values may be secrets).
WORKFLOW_RECORD_VERSION = 1


def workflow_record(plan: RunPlan) -> dict[str, Any]:
    # As a RunPlan: a LaunchPlan's normalized view and fingerprint are no part of it.
    record: dict[str, Any] = _converter.unstructure(plan, RunPlan)
    for child, stored in zip(plan.children, record["children"], strict=True):
        stored.pop("launch", None)  # derived from the rest, and holds env values
        stored.pop("env", None)
        stored["env_keys"] = sorted(child.env)
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
        return _converter.structure(plan, RunPlan)
    except Exception as exc:  # noqa: BLE001 - any shape problem means "unreadable"
        raise ValueError(f"unreadable workflow record ({type(exc).__name__})") from None
