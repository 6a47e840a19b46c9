"""Canonical JSON and fingerprints: equal numbers give one text (`-0` is `0`), and a
non-finite number has no canonical form."""

from __future__ import annotations

import math

import pytest

from subagent_host.planning.fingerprint import canonical_json, fingerprint
from subagent_host.rpc.json_codec import JsonDecodeError, decode_json


def test_minus_zero_and_zero_have_one_canonical_text_and_one_fingerprint() -> None:
    assert canonical_json(-0.0) == canonical_json(0.0) == canonical_json(0) == b"0"
    assert canonical_json({"limits": {"timeoutMs": -0.0}}) == b'{"limits":{"timeoutMs":0}}'
    assert fingerprint({"n": [-0.0]}) == fingerprint({"n": [0]})


def test_an_integral_float_is_written_as_the_integer_it_equals() -> None:
    assert canonical_json([2.0, -3.0, 1.5, 1e300]) == b"[2,-3,1.5,1e+300]"
    assert fingerprint({"timeoutMs": 60000.0}) == fingerprint({"timeoutMs": 60000})


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_has_no_canonical_form(number: float) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        canonical_json({"a": [number]})


def test_the_wire_cannot_carry_a_non_finite_number_and_reads_minus_zero_as_zero() -> None:
    for text in (b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"):
        with pytest.raises(JsonDecodeError):
            decode_json(text)
    zero = decode_json(b"-0")
    assert (zero, type(zero)) == (0, int)
