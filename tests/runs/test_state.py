"""The state machine: first terminal status wins, an ending's facts, gap-free seq."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from subagent_host.backends.exits import StoppedBy
from subagent_host.rpc.json_codec import encode_json
from subagent_host.runs.endings import (
    Cancelled,
    ChildCompleted,
    ChildExit,
    ChildFailed,
    ChildInterrupted,
    Completed,
    Failed,
    LimitReached,
    TimedOut,
)
from subagent_host.runs.state import (
    EVENT_OVERHEAD_BYTES,
    MAX_EVENT_BYTES_KEPT,
    MAX_EVENTS_KEPT,
    PROMPT_HEAD_CHARS,
    STEP_NEXT,
    TERMINAL,
    ChildRun,
    Run,
    RunEvent,
    RunStateMachine,
    RunStatus,
    StepState,
    WorkflowState,
    event_bytes,
    prompt_head,
    restore_events,
)
from subagent_host.values import ReportedStepKind, RunKind
from subagent_host.values.choices import ReachedLimit, StepStatus
from subagent_host.values.events import OutputEvent
from subagent_host.values.facts import ErrorInfo, OutputInfo, Usage

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def make_run() -> Run:
    return Run(
        run_id="r1",
        session_id="s1",
        kind=RunKind.SINGLE,
        fingerprint="sha256:v1:" + "0" * 64,
        created_at=T0,
        children=[ChildRun(index=0, backend="command")],
    )


def test_the_first_terminal_status_wins_and_is_kept() -> None:
    seen: list[RunEvent] = []
    state_machine = RunStateMachine(
        clock=lambda: T0, listener=lambda _run, event: seen.append(event)
    )
    run = make_run()
    assert state_machine.start(run)
    assert state_machine.transition(run, Cancelled("stopped"))
    assert not state_machine.transition(run, Completed())
    assert not state_machine.transition(run, Failed(ErrorInfo("x", "y")))
    assert (run.status, run.reason, run.ended_at) == (RunStatus.CANCELLED, "stopped", T0)
    assert run.error is None
    assert [e.seq for e in seen] == [1, 2] and run.last_seq == 2


def test_an_ending_writes_its_facts_and_a_reopen_clears_them() -> None:
    state_machine = RunStateMachine(clock=lambda: T0)
    run = make_run()
    output = OutputInfo("x", False, 1, 1, partial=True)
    assert state_machine.transition(run, TimedOut("timeout", 5, output))
    facts = (run.status, run.reason, run.enforced_timeout_ms, run.output, run.error)
    assert facts == (RunStatus.TIMED_OUT, "timeout", 5, output, None)
    state_machine.reopen(run)
    assert (run.status, run.reason, run.enforced_timeout_ms, run.output) == (
        RunStatus.QUEUED,
        None,
        None,
        None,
    )
    assert state_machine.transition(run, LimitReached(ReachedLimit.MAX_TURNS))
    assert (run.reached_limit, run.reason, run.ended_at) == ("max-turns", None, T0)


def test_output_partial_must_match_the_ending() -> None:
    partial = OutputInfo("x", False, 1, 1, partial=True)
    with pytest.raises(ValueError, match="whole"):
        Completed(partial)
    with pytest.raises(ValueError, match="whole"):
        ChildCompleted(partial)
    whole = OutputInfo("x", False, 1, 1, partial=False)
    with pytest.raises(ValueError, match="partial"):
        Cancelled("r", whole)
    with pytest.raises(ValueError, match="partial"):
        ChildFailed(ErrorInfo("x", "y"), whole)


def test_a_child_ending_without_its_exit_keeps_what_the_child_has() -> None:
    state_machine = RunStateMachine(clock=lambda: T0)
    run = make_run()
    child = run.children[0]
    state_machine.start_child(run, child, pid=42)
    child.usage = Usage(1, 2, 0, 0)  # sampled while it ran
    assert state_machine.transition_child(run, child, ChildInterrupted("server died"))
    assert (child.usage, child.stopped_by, child.reason) == (Usage(1, 2, 0, 0), None, "server died")
    other = ChildRun(index=1, backend="command", usage=Usage(1, 2, 0, 0))  # sampled
    run.children.append(other)
    state_machine.start_child(run, other)
    exit_ = ChildExit(exit_code=0, stopped_by=StoppedBy.EXIT)
    assert state_machine.transition_child(run, other, ChildFailed(ErrorInfo("x", "y"), exit=exit_))
    # Given, the exit is the whole truth: a parser that failed leaves no usage.
    assert (other.exit_code, other.stopped_by, other.usage) == (0, StoppedBy.EXIT, None)


def test_child_events_share_the_run_sequence() -> None:
    state_machine = RunStateMachine(clock=lambda: T0)
    run = make_run()
    child = run.children[0]
    state_machine.start(run)
    state_machine.start_child(run, child, pid=42)
    state_machine.emit(run, OutputEvent(index=0, text="hi"))
    state_machine.transition_child(run, child, ChildCompleted())
    assert [(e.seq, e.type) for e in run.events] == [
        (1, "status"),
        (2, "child"),
        (3, "output"),
        (4, "child"),
    ]
    assert (child.pid, child.started_at, child.ended_at) == (42, T0, T0)


def test_event_history_is_bounded_while_seq_keeps_counting() -> None:
    state_machine = RunStateMachine(clock=lambda: T0)
    run = make_run()
    for _ in range(MAX_EVENTS_KEPT + 5):
        state_machine.emit(run, OutputEvent(index=0, text="x"))
    assert len(run.events) == MAX_EVENTS_KEPT
    assert run.last_seq == MAX_EVENTS_KEPT + 5 and run.events[0].seq == 6
    assert run.first_retained_seq == 6


def test_event_history_is_bounded_in_bytes_oldest_first() -> None:
    state_machine = RunStateMachine(clock=lambda: T0)
    run = make_run()
    chunk = "x" * (256 * 1024)  # one read of a chatty child's stdout
    chunks = MAX_EVENT_BYTES_KEPT // len(chunk) * 3
    for _ in range(chunks):
        state_machine.emit(run, OutputEvent(index=0, text=chunk))
    held = list(run.events)
    assert run.events.bytes == sum(event_bytes(event) for event in held)
    assert MAX_EVENT_BYTES_KEPT - event_bytes(held[0]) < run.events.bytes <= MAX_EVENT_BYTES_KEPT
    assert [e.seq for e in held] == list(range(run.first_retained_seq, chunks + 1))
    assert run.first_retained_seq > 1 and run.last_seq == chunks


def test_text_is_weighed_in_utf8_bytes() -> None:
    state_machine = RunStateMachine(clock=lambda: T0)
    run = make_run()
    chunk = "é" * (MAX_EVENT_BYTES_KEPT // 4)  # two bytes each: half the budget per event
    for _ in range(3):
        state_machine.emit(run, OutputEvent(index=0, text=chunk))
    assert [e.seq for e in run.events] == [3] and run.first_retained_seq == 3


def test_text_is_weighed_as_the_json_the_client_receives() -> None:
    # A NUL is six bytes in a reply (\u0000): a budget of characters would let the
    # replay of a NUL-printing child grow six times past its figure.
    state_machine = RunStateMachine(clock=lambda: T0)
    run = make_run()
    chunk = "\x00" * (MAX_EVENT_BYTES_KEPT // 12)  # half the budget per event, as JSON
    for _ in range(3):
        state_machine.emit(run, OutputEvent(index=0, text=chunk))
    assert [e.seq for e in run.events] == [3] and run.first_retained_seq == 3
    assert event_bytes(run.events[0]) == EVENT_OVERHEAD_BYTES + 6 * len(chunk)


@pytest.mark.parametrize(
    ("text", "wire"),
    [
        ("plain", "plain"),
        ("\x00\x1f", "\\u0000\\u001f"),
        ('say "hi"\n\t\\', 'say \\"hi\\"\\n\\t\\\\'),
        ("é€😀", "é€😀"),
        ("\ud800x", "\\ud800x"),  # a lone surrogate: the reply falls back to escapes
    ],
)
def test_an_event_weighs_the_bytes_the_encoder_writes(text: str, wire: str) -> None:
    event = RunEvent(seq=1, at=T0, payload=OutputEvent(index=0, text=text))
    reply = encode_json({"text": text})
    assert reply == b'{"text":"' + wire.encode() + b'"}'
    assert event_bytes(event) == EVENT_OVERHEAD_BYTES + len(reply) - len(b'{"text":""}')


def test_the_newest_event_is_kept_even_over_the_byte_budget() -> None:
    state_machine = RunStateMachine(clock=lambda: T0)
    run = make_run()
    state_machine.emit(run, OutputEvent(index=0, text="small"))
    state_machine.emit(run, OutputEvent(index=0, text="x" * (MAX_EVENT_BYTES_KEPT + 1)))
    assert [e.seq for e in run.events] == [2] and run.first_retained_seq == 2


def test_a_released_log_is_empty_and_restored_events_count_again() -> None:
    state_machine = RunStateMachine(clock=lambda: T0)
    run = make_run()
    chunk = "x" * (MAX_EVENT_BYTES_KEPT // 3)
    for _ in range(2):
        state_machine.emit(run, OutputEvent(index=0, text=chunk))
    events = list(run.events)
    run.events.release()
    assert len(run.events) == 0 and run.events.bytes == 0 and run.first_retained_seq == 1
    restore_events(run, events)  # as a resume does, from disk
    state_machine.emit(run, OutputEvent(index=0, text=chunk))
    assert [e.seq for e in run.events] == [2, 3] and run.first_retained_seq == 2


def make_workflow_run() -> Run:
    run = make_run()
    run.kind = RunKind.WORKFLOW
    run.workflow = WorkflowState(
        name="w",
        steps=[
            StepState(index=0, kind=ReportedStepKind.PROMPT),
            StepState(index=1, kind=ReportedStepKind.PROMPT),
        ],
    )
    return run


def test_a_step_runs_then_ends_once_and_refuses_any_later_status() -> None:
    seen: list[RunEvent] = []
    state_machine = RunStateMachine(
        clock=lambda: T0, listener=lambda _run, event: seen.append(event)
    )
    run = make_workflow_run()
    assert run.workflow is not None
    step, later = run.workflow.steps
    assert not state_machine.transition_step(
        run, step, StepStatus.COMPLETED
    )  # a step that never ran
    assert not state_machine.transition_step(
        run, later, StepStatus.INTERRUPTED
    )  # nor a dead server's
    assert state_machine.transition_step(run, step, StepStatus.RUNNING)
    assert state_machine.transition_step(run, step, StepStatus.FAILED)
    assert not state_machine.transition_step(run, step, StepStatus.COMPLETED)
    assert not state_machine.transition_step(run, step, StepStatus.INTERRUPTED)
    assert not state_machine.transition_step(run, step, StepStatus.RUNNING)
    assert [s.status for s in run.workflow.steps] == ["failed", "pending"]
    assert seen == []  # a step's status is seen in snapshots: it has no event of its own


def test_a_step_is_pending_or_running_until_it_ends_with_a_run_s_terminal_status() -> None:
    # StepStatus spells the terminal statuses again (an enumeration cannot extend another):
    # they must stay a run's, in a run's order (the schema lists them so).
    ended = [status for status in RunStatus if status in TERMINAL]
    assert [*StepStatus] == [StepStatus.PENDING, StepStatus.RUNNING, *ended]
    assert {StepStatus(status) for status in TERMINAL} == STEP_NEXT[StepStatus.RUNNING]


def test_only_a_step_that_ended_is_reopened_and_then_it_ends_once_more() -> None:
    state_machine = RunStateMachine(clock=lambda: T0)
    run = make_workflow_run()
    assert run.workflow is not None
    step, later = run.workflow.steps
    with pytest.raises(ValueError, match="pending"):
        state_machine.reopen_step(run, later, StepStatus.RUNNING)
    state_machine.transition_step(run, step, StepStatus.RUNNING)
    with pytest.raises(ValueError, match="running"):
        state_machine.reopen_step(run, step, StepStatus.RUNNING)
    state_machine.transition_step(run, step, StepStatus.CANCELLED)
    state_machine.reopen_step(run, step, StepStatus.RUNNING)
    assert state_machine.transition_step(run, step, StepStatus.COMPLETED)
    assert not state_machine.transition_step(run, step, StepStatus.FAILED)
    assert step.status == "completed"


def test_a_prompt_head_is_its_first_line_cut_short() -> None:
    assert prompt_head("\n  Summarize   the README\nthen more") == "Summarize the README"
    assert prompt_head(None) is None and prompt_head(" \n ") is None
    long = prompt_head("x" * 200)
    assert long is not None and len(long) == PROMPT_HEAD_CHARS and long.endswith("…")
