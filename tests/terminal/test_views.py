"""How runs read for a person: the words every terminal subcommand shares."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from subagent_host.backends.exits import StoppedBy
from subagent_host.runs.state import ChildRun, Run, WorkflowState
from subagent_host.store.browse import LaunchSummary
from subagent_host.terminal.views import (
    child_head,
    cost,
    count,
    duration,
    elapsed,
    how_it_ended,
    last_line,
    launch_head,
    plural,
    printable,
    run_tokens,
    short_id,
    shorten,
    size,
    tail,
    tokens,
)
from subagent_host.values import RunKind
from subagent_host.values.facts import Usage


def test_plurals_agree_with_their_count() -> None:
    assert plural(1, "run") == "1 run"
    assert plural(0, "run") == "0 runs"
    assert plural(2, "child", "children") == "2 children"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.42, "0.4s"), (12.7, "12s"), (184, "3m04s"), (7500, "2h05m")],
)
def test_durations_read_at_a_glance(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_elapsed_runs_to_now_until_the_end_and_is_a_dash_before_the_start() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert elapsed(None, None) == "-"
    assert elapsed(start, start + timedelta(seconds=3)) == "3.0s"
    assert elapsed(start, None, now=start + timedelta(seconds=61)) == "1m01s"


def test_counts_and_ids_are_short() -> None:
    assert [count(950), count(12_345), count(4_100_000)] == ["950", "12.3k", "4.1M"]
    assert short_id("9ee9a9d0e9be41189813482977d4ee8b") == "9ee9a9d0"


def test_a_runs_tokens_and_cost_read_from_every_attempt_of_its_children() -> None:
    def child(index: int, usage: Usage | None) -> ChildRun:
        return ChildRun(index=index, backend="pi", usage=usage)

    priced = Usage(1000, 200, 0, 0, 0.01)
    run = Run(
        run_id="r" * 32,
        session_id="s1",
        kind=RunKind.PARALLEL,
        fingerprint="sha256:v1:" + "0" * 64,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        children=[child(0, priced), child(1, None)],
        earlier_usage=priced,
    )
    assert run_tokens(run) == "2.0k in, 400 out"
    assert cost(run.usage) == "$0.0200" and tokens(None) == "-" and cost(None) == "-"
    assert cost(Usage(500, 100, 0, 0, None)) == "-"


def test_a_child_is_named_by_its_command_its_prompt_or_its_backend_and_agent() -> None:
    command = ChildRun(index=0, backend="command")
    assert (
        child_head(command, LaunchSummary("command", ("sh", "-c", "echo hi"), None))
        == "sh -c 'echo hi'"
    )
    prompted = ChildRun(index=0, backend="pi", prompt_head="Summarize the README")
    assert child_head(prompted, LaunchSummary("pi", ("pi", "--mode", "json"), "m")) == (
        "pi: Summarize the README"
    )
    older = ChildRun(index=0, backend="claude")  # recorded before prompt heads were kept
    assert child_head(older, LaunchSummary("claude", (), None, "reviewer")) == (
        "claude agent reviewer"
    )
    assert child_head(older, LaunchSummary("claude", (), "opus")) == "claude opus"
    assert child_head(older, None) == "claude"


def test_a_run_is_named_by_its_workflow_or_its_first_child_and_how_many_more() -> None:
    run = Run(
        run_id="r" * 32,
        session_id="s",
        kind=RunKind.PARALLEL,
        fingerprint="f",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        children=[ChildRun(index=0, backend="command"), ChildRun(index=1, backend="command")],
    )
    assert launch_head(run, {0: LaunchSummary("command", ("true",), None)}) == "true (+1 more)"
    run.workflow = WorkflowState(name="review", steps=[])
    assert launch_head(run, {}) == "workflow review"
    assert shorten("a  b\nc", 60) == "a b c" and shorten("x" * 70, 10) == "x" * 9 + "…"


def test_how_a_child_ended_and_the_tail_of_a_text_read_at_a_glance() -> None:
    assert how_it_ended(ChildRun(index=0, backend="command")) == "-"
    assert how_it_ended(ChildRun(index=0, backend="command", exit_code=3)) == "exit 3"
    killed = ChildRun(index=0, backend="pi", signal=9, stopped_by=StoppedBy("sigkill"))
    assert how_it_ended(killed) == "SIGKILL, stopped by sigkill"
    assert tail("1\n2\n3\n", 2) == ("2\n3", 1) and tail("1", 5) == ("1", 0)


def test_memory_reads_in_kilo_mega_and_gigabytes() -> None:
    assert [size(v) for v in (None, 0, 900, 5000, 50 << 20, 3 << 30)] == [
        "-",
        "-",
        "1K",
        "4K",
        "50.0M",
        "3.0G",
    ]


def test_a_childs_text_loses_its_terminal_escapes_and_controls_but_keeps_its_lines() -> None:
    text = "a\x1b[31mred\x1b[0m\x1b]0;title\x07 b\r\nc\x07d\x9b2J\tend"
    assert printable(text) == "ared b\ncd2J\tend"
    assert printable("50%\r100%") == "50%\n100%"


def test_the_last_line_is_the_last_that_says_something_on_one_line() -> None:
    assert last_line("first\n  second   part \n\n  \n") == "second part"
    assert last_line("\x1b[1mbold\x1b[0m") == "bold"
    assert last_line(None) == last_line("") == ""
