"""Fingerprints: `sha256:v1:` + SHA-256 of the canonical JSON of a plan.

Canonical JSON: object keys sorted, absent/None members omitted, array order
kept, non-finite numbers rejected, -0 written as 0, UTF-8, no spaces.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Final

PREFIX: Final = "sha256:v1:"


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        _normalize(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    ).encode("utf-8")


def fingerprint(value: Any) -> str:
    return PREFIX + hashlib.sha256(canonical_json(value)).hexdigest()


def _normalize(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _normalize(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_normalize(v) for v in value]
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite numbers have no canonical JSON form")
        return 0.0 if value == 0 else value  # -0.0 -> 0.0
    return value
