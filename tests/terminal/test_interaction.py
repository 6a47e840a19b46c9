"""An interactive child's conversation as the terminal shows it, without a server: the
option `permit` and `watch` pick, the permissions still pending, the lines `logs` and
`show` print for `turn`, `input` and `permission` events, the rows `watch` draws for
pending permissions, and the keys that answer them."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from rich.console import Console

from subagent_host.runs.state import ChildRun, Run, RunEvent
from subagent_host.terminal.interaction import (
    INPUT_CHARS,
    NoSuchAnswer,
    choose_option,
    event_line,
    pending_permissions,
)
from subagent_host.terminal.keys import Key, decode
from subagent_host.terminal.logs import Printer
from subagent_host.terminal.show_conversation import conversation, pending
from subagent_host.terminal.watch_board import run_line
from subagent_host.terminal.watch_screen import View, screen
from subagent_host.values import RunKind, RunStatus
from subagent_host.values.choices import (
    DeliveryState,
    OptionKind,
    PermissionStage,
    Phase,
    ToolKind,
    TurnState,
)
from subagent_host.values.events import InputEvent, OutputEvent, PermissionEvent, TurnEvent
from subagent_host.values.interaction import PendingPermission, PermissionOption, TurnInfo

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ALL = tuple(PermissionOption(kind.value, kind.value.title(), kind) for kind in OptionKind)


def asked(permission_id: str, options: tuple[PermissionOption, ...] = ALL) -> PermissionEvent:
    return PermissionEvent(
        index=0,
        permission_id=permission_id,
        stage=PermissionStage.ASKED,
        name="Bash",
        kind=ToolKind.EXECUTE,
        summary="printf x > written.txt",
        options=options,
    )


def later(event: PermissionEvent, stage: PermissionStage, **fields: Any) -> PermissionEvent:
    return PermissionEvent(
        index=event.index,
        permission_id=event.permission_id,
        stage=stage,
        name=event.name,
        kind=event.kind,
        summary=event.summary,
        options=event.options,
        **fields,
    )


def waiting(permission_id: str, options: tuple[PermissionOption, ...] = ALL) -> PendingPermission:
    (found,) = pending_permissions([asked(permission_id, options)])
    return found


@pytest.mark.parametrize(
    ("allow", "always", "kind"),
    [
        (True, False, OptionKind.ALLOW_ONCE),
        (True, True, OptionKind.ALLOW_ALWAYS),
        (False, False, OptionKind.REJECT_ONCE),
        (False, True, OptionKind.REJECT_ALWAYS),
    ],
)
def test_allow_or_reject_once_or_always_picks_the_option_of_that_kind(
    allow: bool, always: bool, kind: OptionKind
) -> None:
    assert choose_option(waiting("0.p"), allow, always).kind is kind


def test_an_answer_the_permission_does_not_offer_is_refused_never_widened() -> None:
    only_always = tuple(
        o for o in ALL if o.kind in (OptionKind.ALLOW_ALWAYS, OptionKind.REJECT_ONCE)
    )
    with pytest.raises(NoSuchAnswer) as refused:
        choose_option(waiting("0.p", only_always), allow=True, always=False)
    assert str(refused.value) == (
        "permission 0.p offers no allow-once answer (it offers allow-always, reject-once)"
    )


def test_a_permission_is_pending_until_it_is_answered_or_withdrawn() -> None:
    first, second, third = asked("0.a"), asked("0.b"), asked("0.c")
    events = [
        first,
        second,
        later(first, PermissionStage.ANSWERED, option_id="allow-once", answered_by="client"),
        third,
        later(third, PermissionStage.WITHDRAWN, reason="the turn was interrupted"),
    ]
    assert [p.permission_id for p in pending_permissions(events)] == ["0.b"]
    assert pending_permissions([]) == ()


def test_each_event_of_a_conversation_is_one_bounded_line_without_escapes() -> None:
    ask = asked("0.p")
    long = "fix \x1b[2Jthe\ntests " + "x" * 1000
    lines = [
        event_line(TurnEvent(index=0, phase=Phase.START)),
        event_line(TurnEvent(index=0, phase=Phase.END, stop_reason="interrupted")),
        event_line(InputEvent(index=0, message_id="m-1", state=DeliveryState.QUEUED, text=long)),
        event_line(
            InputEvent(
                index=0, message_id="m-2", state=DeliveryState.REFUSED, text="hi", reason="busy"
            )
        ),
        event_line(ask),
        event_line(
            later(
                ask,
                PermissionStage.ANSWERED,
                option_id="reject-once",
                answered_by="client:terminal",
            )
        ),
        event_line(later(ask, PermissionStage.ANSWERED, option_id="x", answered_by="timeout")),
        event_line(later(ask, PermissionStage.WITHDRAWN, reason="the turn was interrupted")),
    ]
    assert lines[:2] == ["turn start", "turn end: interrupted"]
    message = lines[2]
    assert message.startswith("message m-1 queued: fix the tests xxx")
    assert "\x1b" not in message and "\n" not in message
    assert len(message) == len("message m-1 queued: ") + INPUT_CHARS and message.endswith("…")
    assert lines[3] == "message m-2 refused: hi (refused: busy)"
    assert lines[4] == "permission 0.p asked: Bash (execute): printf x > written.txt"
    assert lines[5] == (
        "permission 0.p answered: reject-once by client:terminal"
        " [Bash (execute): printf x > written.txt]"
    )
    assert lines[6].startswith("permission 0.p answered: x by timeout")
    assert lines[7] == "permission 0.p withdrawn: the turn was interrupted"


def interactive_run(children: int = 1) -> Run:
    return Run(
        run_id="1a2b3c4d" + "0" * 24,
        session_id="s",
        kind=RunKind.SINGLE if children == 1 else RunKind.PARALLEL,
        fingerprint="sha256:v1:" + "0" * 64,
        created_at=NOW - timedelta(seconds=5),
        started_at=NOW - timedelta(seconds=5),
        status=RunStatus.RUNNING,
        children=[
            ChildRun(
                index=i,
                backend="command",
                status=RunStatus.RUNNING,
                started_at=NOW,
                turn=TurnInfo(count=1, state=TurnState.RUNNING),
            )
            for i in range(children)
        ],
    )


def recorded(*payloads: Any) -> list[RunEvent]:
    return [RunEvent(seq=i, at=NOW, payload=p) for i, p in enumerate(payloads, start=1)]


def test_logs_puts_each_turn_message_and_permission_on_a_line_of_its_own() -> None:
    out = io.StringIO()
    printer = Printer(Console(file=out, force_terminal=False, width=200), several=False)
    run = interactive_run()
    for event in recorded(
        TurnEvent(index=0, phase=Phase.START),
        OutputEvent(index=0, text="working"),  # an open line: ended before the next
        asked("0.p"),
        later(asked("0.p"), PermissionStage.ANSWERED, option_id="allow-once", answered_by="client"),
        OutputEvent(index=0, text=" done\n"),
        TurnEvent(index=0, phase=Phase.END, stop_reason="end_turn"),
        InputEvent(index=0, message_id="m-1", state=DeliveryState.DELIVERED, text="next"),
    ):
        printer.event(event, run)
    assert out.getvalue().splitlines() == [
        "» turn start",
        "working",
        "» permission 0.p asked: Bash (execute): printf x > written.txt",
        "» permission 0.p answered: allow-once by client [Bash (execute): printf x > written.txt]",
        " done",
        "» turn end: end_turn",
        "» message m-1 delivered: next",
    ]


def test_show_prints_the_conversation_and_how_to_answer_what_is_pending() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=300)
    run = interactive_run(children=2)
    events = recorded(
        TurnEvent(index=0, phase=Phase.START),
        asked("0.p"),
        InputEvent(index=1, message_id="m-1", state=DeliveryState.QUEUED, text="later"),
    )
    conversation(console, run, events, shown_at_most=20)
    pending(console, run, events)
    assert out.getvalue().splitlines() == [
        "",
        "conversation",
        "[0] turn start",
        "[0] permission 0.p asked: Bash (execute): printf x > written.txt",
        "[1] message m-1 queued: later",
        "",
        "pending permissions",
        "  0.p child 0 asks: Bash (execute): printf x > written.txt"
        " [allow-once, allow-always, reject-once, reject-always]",
        "answer: subagent-host permit 1a2b3c4d 0.p allow|reject",
    ]
    quiet = io.StringIO()
    nothing = recorded(later(asked("0.p"), PermissionStage.WITHDRAWN))
    pending(Console(file=quiet, force_terminal=False), run, [*events, *nothing])
    assert quiet.getvalue() == ""


def test_watch_draws_pending_permissions_under_their_run_and_marks_the_one_keys_answer() -> None:
    runs = [interactive_run(), interactive_run()]
    runs[1].run_id = "9f8e7d6c" + "0" * 24
    board = tuple(
        attrs.evolve(run_line(run, {}, {}), pending=pending_permissions([asked(f"0.{n}-long")]))
        for n, run in enumerate(runs)
    )
    console = Console(width=160, height=12, file=io.StringIO(), record=True)
    view = View(state_dir=Path("/state"), selected=runs[1].run_id)
    console.print(screen(board, view, NOW, 12))
    text = console.export_text()
    rows = [line for line in text.splitlines() if "asks" in line]
    assert len(rows) == 2
    assert "? 0.0-long" in rows[0] and "a allow once" not in rows[0]
    assert "? 0.1-long" in rows[1] and "a allow once · r reject  printf x" in rows[1]
    assert "a/r allow/reject" in text


def test_a_and_r_are_the_keys_that_allow_and_reject() -> None:
    assert decode(b"ar") == [Key.ALLOW, Key.REJECT]
