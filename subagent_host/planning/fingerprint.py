"""Fingerprints: `sha256:v1:` + SHA-256 of the canonical JSON of a plan.

Canonical JSON: object keys sorted, absent/None members omitted, array order
kept, non-finite numbers rejected, a number with an integral value written as
an integer (`-0.0`, `0.0` and `-0` as `0`, `2.0` as `2`, as RFC 8785 writes
them), UTF-8, no spaces. A plan holds integers only (the wire refuses a float
where an integer is due, and JSON has no NaN or Infinity), so only the rule's
consistency is at stake: equal numbers always give the same text.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Final

from subagent_host.values import DIGEST_PREFIX
from subagent_host.values.json_values import JsonValue

# Beyond 2**53 a float no longer holds every integer: written as it is.
MAX_SAFE_INTEGER: Final = 2**53


# Built once: `json.dumps` with options of its own builds an encoder at every call.
_CANONICAL: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: JsonValue) -> bytes:
    return _CANONICAL.encode(_normalize(value)).encode("utf-8")


def fingerprint(value: JsonValue) -> str:
    return DIGEST_PREFIX + hashlib.sha256(canonical_json(value)).hexdigest()


def _normalize(value: JsonValue) -> JsonValue:
    if isinstance(value, dict):
        return {str(k): _normalize(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):  # a tuple of types: `list | tuple` is built per call
        return [_normalize(v) for v in value]
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite numbers have no canonical JSON form")
        if value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
            return int(value)  # -0.0 -> 0, 2.0 -> 2: equal numbers, one text
        return value
    return value


def digest(text: str) -> str:
    """A text's digest (a prompt's, a task's, a follow-up's): `sha256:v1:` + its SHA-256."""
    return DIGEST_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()
