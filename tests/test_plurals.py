"""Counted words agree with their count, in the server's messages as in the terminal's."""

from __future__ import annotations

from subagent_host.terminal.views import plural as terminal_plural
from subagent_host.values.plurals import between, plural


def test_a_count_and_its_noun_agree() -> None:
    assert [plural(n, "run") for n in (0, 1, 2)] == ["0 runs", "1 run", "2 runs"]
    assert plural(1, "process", "processes") == "1 process"
    assert plural(3, "process", "processes") == "3 processes"
    assert terminal_plural is plural  # the terminal's word is the same one


def test_a_range_of_one_number_is_said_once() -> None:
    assert between(1, 8, "item") == "1 to 8 items"
    assert between(1, 1, "item") == "1 item"
    assert between(2, 2, "child", "children") == "2 children"
