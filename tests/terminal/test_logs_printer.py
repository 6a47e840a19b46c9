"""The logs printer alone: lines of several children never mix, a child's unfinished
line is written as it comes (one child) or held in bounded pieces (several); its stderr
is shown as whole lines, each marked, and not again from its stored tail."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

from rich.console import Console

from subagent_host.runs.state import ChildRun, Run, RunEvent
from subagent_host.terminal.logs import HELD_LINE_MAX, Printer
from subagent_host.values import RunKind, RunStatus
from subagent_host.values.choices import PlanPriority, PlanStatus
from subagent_host.values.events import ChildEvent, OutputEvent, PlanEntry, PlanEvent, StderrEvent
from subagent_host.values.facts import OutputInfo


def printer(several: bool) -> tuple[Printer, io.StringIO]:
    out = io.StringIO()
    return Printer(Console(file=out, force_terminal=False, width=200), several), out


def output(
    seq: int, index: int, text: str, kind: type[OutputEvent | StderrEvent] = OutputEvent
) -> RunEvent:
    return RunEvent(seq=seq, at=datetime.now(UTC), payload=kind(index=index, text=text))


def child(seq: int, status: RunStatus) -> RunEvent:
    return RunEvent(seq=seq, at=datetime.now(UTC), payload=ChildEvent(index=0, status=status))


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


def test_stderr_events_are_shown_as_whole_lines_each_marked_in_order() -> None:
    p, out = printer(several=False)
    events: list[tuple[int, str, type[OutputEvent | StderrEvent]]] = [
        (0, "out one\nout tw", OutputEvent),
        (0, "err o", StderrEvent),
        (0, "ne\nerr", StderrEvent),
    ]
    events += [(0, "o\n", OutputEvent), (0, " two\n", StderrEvent), (0, "last words", StderrEvent)]
    for seq, (index, text, kind) in enumerate(events, start=1):
        p.event(output(seq, index, text, kind), NO_RUN)
    p.finish(None)
    # The open stdout line is ended before a stderr line: they never share a line.
    assert out.getvalue() == (
        "out one\nout tw\nstderr| err one\no\nstderr| err two\nstderr| last words\n"
    )


def test_several_childrens_stderr_lines_are_prefixed_and_never_mix() -> None:
    p, out = printer(several=True)
    events = [(0, "a ", StderrEvent), (1, "b\n", StderrEvent), (0, "warns\n", StderrEvent)]
    for seq, (index, text, kind) in enumerate(events, start=1):
        p.event(output(seq, index, text, kind), NO_RUN)
    assert out.getvalue() == "[1] stderr| b\n[0] stderr| a warns\n"


def ended_run(stderr_tail: str) -> Run:
    """A run of one command child that ended, its record keeping `stderr_tail`."""
    now = datetime.now(UTC)
    output = OutputInfo("", False, 0, 0, False, stderr_tail=stderr_tail)
    child = ChildRun(index=0, backend="command", status=RunStatus.COMPLETED, output=output)
    return Run(
        run_id="r" * 26,
        session_id="s",
        kind=RunKind.SINGLE,
        status=RunStatus.COMPLETED,
        created_at=now,
        fingerprint="f",
        children=[child],
        started_at=now,
        ended_at=now,
    )


def test_a_childs_stderr_streamed_is_not_shown_again_from_its_stored_tail() -> None:
    run = ended_run("said on stderr\n")
    p, out = printer(several=False)
    p.event(output(1, 0, "said on stderr\n", StderrEvent), run)
    p.event(child(2, RunStatus.COMPLETED), run)
    p.finish(run)
    assert out.getvalue().startswith("stderr| said on stderr\nrun rrrrrrrr completed")


def test_a_childs_stderr_not_streamed_is_shown_from_its_stored_tail() -> None:
    run = ended_run("said on stderr\n")
    p, out = printer(several=False)
    p.event(child(1, RunStatus.COMPLETED), run)
    p.finish(run)
    assert out.getvalue().startswith("stderr| said on stderr\nrun rrrrrrrr completed")


def test_a_later_attempt_that_did_not_stream_its_stderr_shows_its_stored_tail() -> None:
    run = ended_run("the second attempt said\n")
    run.children[0].attempt = 2
    p, out = printer(several=False)
    p.event(output(1, 0, "the first attempt said\n", StderrEvent), run)
    p.event(child(2, RunStatus.FAILED), run)
    p.event(child(3, RunStatus.RUNNING), run)  # resumed, without stream
    p.event(child(4, RunStatus.COMPLETED), run)
    p.finish(run)
    assert out.getvalue().startswith(
        "stderr| the first attempt said\nstderr| the second attempt said\nrun rrrrrrrr"
    )


def test_a_plan_is_one_line_of_where_it_stands_ending_the_text_before_it() -> None:
    p, out = printer(several=False)
    feed(p, (0, "thinking"))
    steps = (
        PlanEntry(content="read", priority=PlanPriority.HIGH, status=PlanStatus.COMPLETED),
        PlanEntry(
            content="fix\x1b[31m it", priority=PlanPriority.LOW, status=PlanStatus.IN_PROGRESS
        ),
        PlanEntry(content="test", priority=PlanPriority.MEDIUM, status=PlanStatus.PENDING),
    )
    p.event(
        RunEvent(seq=2, at=datetime.now(UTC), payload=PlanEvent(index=0, entries=steps)), NO_RUN
    )
    plan = PlanEvent(index=0, entries=())
    p.event(RunEvent(seq=3, at=datetime.now(UTC), payload=plan), NO_RUN)
    lines = out.getvalue().splitlines()
    assert lines[0] == "thinking"
    assert lines[1].endswith("plan: 1/3 done, now: fix it")
    assert lines[2].endswith("plan: 0/0 done")
