"""Usage added up (protocol.md §12): tokens summed over the parts that reported usage,
a cost only when every one of them has a cost, nothing when none reported usage."""

from __future__ import annotations

import pytest

from subagent_host.values.facts import Usage

PRICED = Usage(1000, 200, 30, 4, 0.01)
UNPRICED = Usage(500, 100, 0, 6, None)


def test_tokens_of_every_part_are_summed_and_parts_without_usage_are_left_out() -> None:
    total = Usage.total([PRICED, None, UNPRICED, None])
    assert total == Usage(1500, 300, 30, 10, None)


def test_a_cost_is_summed_only_when_every_part_with_usage_has_one() -> None:
    assert Usage.total([PRICED, PRICED, None]) == Usage(2000, 400, 60, 8, 0.02)
    total = Usage.total([PRICED, UNPRICED])
    assert total is not None and total.cost_usd is None


def test_nothing_reported_is_no_usage_not_zero_tokens() -> None:
    assert Usage.total([]) is None
    assert Usage.total([None, None]) is None


def test_one_part_is_its_own_total() -> None:
    assert Usage.total([None, UNPRICED]) is UNPRICED


def test_summed_costs_do_not_carry_float_noise() -> None:
    total = Usage.total([Usage(1, 1, 0, 0, 0.1)] * 3)
    assert total is not None and total.cost_usd == pytest.approx(0.3)
    assert total.cost_usd == 0.3  # 0.1 + 0.1 + 0.1 is 0.30000000000000004 unrounded
