"""The one converter of stored records: how the store spells runs, children and workflows.

A record is written as its attrs class names its fields (snake_case), with every field
that equals its default left out and timestamps in ISO 8601 (`+00:00`). The store's run
and child records (`store/records.py`) and a workflow's stored definition
(`planning/stored_workflow.py`) are both written and read with this one instance; the
store registers the hooks of its own types on it. It is not the wire's converter
(`rpc/wire/`): the same types are spelled otherwise there (a placement's `node_id` is
`nodeId` on the wire, a timestamp ends in `Z`), and records of earlier versions must be
read back, and hashed, exactly as they were written (ARCHITECTURE.md, "Converters").
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Final

import cattrs

RECORDS: Final = cattrs.Converter(omit_if_default=True)
# An enumeration (a status, a step's kind, ...) is stored as its value and read back as
# its member: records of earlier versions, which stored the same strings, read alike.
RECORDS.register_unstructure_hook(enum.StrEnum, str)
RECORDS.register_unstructure_hook(datetime, datetime.isoformat)
RECORDS.register_structure_hook(datetime, lambda value, _: datetime.fromisoformat(value))
