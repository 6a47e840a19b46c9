"""Strict JSON text <-> Python values, for bytes that arrive from and leave for the client.

Python's `json` accepts `NaN`/`Infinity` and emits them (neither is JSON), turns
`1e400` into an infinite float, raises `RecursionError` (not `ValueError`) on deep
nesting and `ValueError` on integers of 4300+ digits. Every one of those becomes a
`JsonDecodeError` here with a message fit for a client, so callers catch one type.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Final


class JsonDecodeError(ValueError):
    """The bytes are not one strict JSON text; the message says why, for the client."""


class JsonEncodeError(ValueError):
    """A value cannot be written as strict JSON (non-finite number, unknown type)."""


def _reject_constant(name: str) -> Any:
    raise JsonDecodeError(f"{name} is not valid JSON")


def _parse_finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonDecodeError(f"number {text[:32]} is out of range")
    return value


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_parse_finite_float)
_ENCODER: Final = json.JSONEncoder(
    allow_nan=False, ensure_ascii=False, separators=(",", ":"), check_circular=False
)
# For text holding a lone surrogate (read from a "\ud800" escape): only \u escapes
# can carry it, as UTF-8 cannot.
_ASCII_ENCODER: Final = json.JSONEncoder(
    allow_nan=False, ensure_ascii=True, separators=(",", ":"), check_circular=False
)


def decode_json(data: bytes) -> Any:
    """Parse one JSON text from UTF-8 bytes, or raise `JsonDecodeError`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonDecodeError(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        return _DECODER.decode(text.removeprefix("\ufeff"))
    except JsonDecodeError:
        raise
    except json.JSONDecodeError as exc:
        raise JsonDecodeError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise JsonDecodeError("JSON nesting is too deep") from None
    except ValueError:  # the only other ValueError: an integer past the conversion limit
        limit = sys.get_int_max_str_digits()
        raise JsonDecodeError(f"an integer has more than {limit} digits") from None


def encode_json(value: Any) -> bytes:
    """Serialize plain JSON values (dict, list, str, int, finite float, bool, None) to UTF-8."""
    try:
        text = _ENCODER.encode(value)
    except (ValueError, TypeError, RecursionError) as exc:
        raise JsonEncodeError(str(exc)) from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _ASCII_ENCODER.encode(value).encode("ascii")
