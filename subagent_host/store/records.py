"""Runs and children as stored records: plain JSON-able dicts, and back (schema v1).

The store keeps a run's own fields and each child attempt's fields as JSON
documents beside a few indexed columns; this module is the one place that
knows how a `Run` or `ChildRun` is spelled there. Timestamps are ISO 8601 UTC.
"""

from __future__ import annotations

import json
from typing import Final

import attrs
from cattrs.gen import make_dict_unstructure_fn

from subagent_host.planning.record_form import RECORDS as _converter
from subagent_host.runs.state import ChildRun, EventLog, Run, StepState
from subagent_host.values import STEP_COMMAND, STEP_PROMPT
from subagent_host.values.facts import Usage
from subagent_host.values.json_values import JsonObject

# The hooks of the store's own types, on the one record converter (runs' types are
# never part of a workflow's stored plan, the converter's other user).
# Never in a record (see _RUN_EXCLUDED); a run read back starts with an empty log.
_converter.register_structure_hook(EventLog, lambda _value, _: EventLog())
# A step of kind `command` is a `prompt` step whose item runs a command: its record
# keeps the planned kind, `prompt`, as records always have (reads.py reads the kind
# again from the workflow's stored definition).
_plain_step = make_dict_unstructure_fn(StepState, _converter, _cattrs_omit_if_default=True)


def _step_record(step: StepState) -> dict[str, object]:
    record: dict[str, object] = _plain_step(step)
    if step.kind == STEP_COMMAND:
        record["kind"] = STEP_PROMPT
    return record


_converter.register_unstructure_hook(StepState, _step_record)

# Fields of a Run that are not its own record: children are rows of their own,
# events are rows of their own, and the usage of earlier attempts is summed from
# those attempts' rows when the run is read back (reads.py).
_RUN_EXCLUDED = ("children", "events", "earlier_usage", "pending_permissions")


def run_record(run: Run) -> JsonObject:
    # Field by field: unstructuring the whole run would convert up to 10,000
    # events (and every child) only to throw them away, at every write.
    record: JsonObject = {}
    for field in attrs.fields(Run):
        if field.name in _RUN_EXCLUDED:
            continue
        value = getattr(run, field.name)
        if value != field.default:
            record[field.name] = _converter.unstructure(value)
    return record


# Not part of a child's record: a live process handle.
_CHILD_EXCLUDED = ("start_time_probe",)


def child_record(child: ChildRun) -> JsonObject:
    record: JsonObject = _converter.unstructure(child)
    for name in _CHILD_EXCLUDED:
        record.pop(name, None)
    return record


def run_from_record(record: JsonObject, children: list[ChildRun]) -> Run:
    fields = {k: v for k, v in record.items() if k not in _RUN_EXCLUDED}
    run = _converter.structure({**fields, "children": []}, Run)
    run.children = children
    return run


def child_from_record(record: JsonObject) -> ChildRun:
    return _converter.structure(dict(record), ChildRun)


def usage_from_record(text: str) -> Usage:
    """A child attempt's usage as its record spells it (`json_extract(record, '$.usage')`)."""
    return _converter.structure(json.loads(text), Usage)


def dumps(value: object) -> str:
    """Compact JSON as stored (no NaN: SQLite's JSON functions could not read it)."""
    return _ENCODER.encode(value)


# Built once: `json.dumps` with options of its own builds an encoder at every call,
# and a short run's write encodes seven records.
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
