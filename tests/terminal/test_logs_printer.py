"""The logs printer alone: lines of several children never mix, a child's unfinished
line is written as it comes (one child) or held in bounded pieces (several)."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

from rich.console import Console

from subagent_host.runs.state import RunEvent
from subagent_host.terminal.logs import HELD_LINE_MAX, Printer


def printer(several: bool) -> tuple[Printer, io.StringIO]:
    out = io.StringIO()
    return Printer(Console(file=out, force_terminal=False, width=200), several), out


def output(seq: int, index: int, text: str) -> RunEvent:
    fields: dict[str, Any] = {"index": index, "text": text}
    return RunEvent(seq=seq, type="output", at=datetime.now(UTC), fields=fields)


NO_RUN: Any = None  # output events never look at the run


def feed(p: Printer, *chunks: tuple[int, str]) -> None:
    for seq, (index, text) in enumerate(chunks, start=1):
        p.event(output(seq, index, text), NO_RUN)


def test_lines_of_several_children_never_mix_and_keep_their_order() -> None:
    p, out = printer(several=True)
    feed(p, (0, "al"), (1, "be"), (0, "pha\nga"), (1, "ta\n"), (0, "mma\n"))
    assert out.getvalue() == "[0] alpha\n[1] beta\n[0] gamma\n"


def test_an_unfinished_line_of_several_children_is_ended_at_finish() -> None:
    p, out = printer(several=True)
    feed(p, (0, "a\nb"), (1, "c"))
    p.finish(None)
    assert out.getvalue() == "[0] a\n[0] b\n[1] c\n"


def test_one_childs_endless_line_is_written_as_it_comes_and_ended_once() -> None:
    p, out = printer(several=False)
    for _ in range(1000):
        feed(p, (0, "x" * 1000))
        assert out.getvalue().count("x") % 1000 == 0  # nothing held back
    assert out.getvalue() == "x" * 1_000_000
    p.finish(None)
    assert out.getvalue() == "x" * 1_000_000 + "\n"


def test_one_childs_finished_line_is_not_ended_twice() -> None:
    p, out = printer(several=False)
    feed(p, (0, "one\ntw"), (0, "o\n"))
    p.finish(None)
    assert out.getvalue() == "one\ntwo\n"


def test_several_childrens_endless_line_is_held_in_bounded_pieces() -> None:
    p, out = printer(several=True)
    chunk = "y" * 1000
    for _ in range(1000):
        feed(p, (1, chunk))
    p.finish(None)
    lines = out.getvalue().split("\n")
    assert lines[-1] == ""
    shown = [line.removeprefix("[1] ") for line in lines[:-1]]
    assert all(line.startswith("[1] ") for line in lines[:-1])
    assert "".join(shown) == chunk * 1000  # nothing lost
    assert all(len(piece) < HELD_LINE_MAX + len(chunk) for piece in shown)
    assert len(shown) > 1  # the line was shown in pieces, never held whole
