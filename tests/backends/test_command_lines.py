"""A plain command's conversation: one line in, the next line out ends the turn."""

from __future__ import annotations

import signal

import pytest

from subagent_host.backends.base import ItemSpec
from subagent_host.backends.interactive.base import (
    Approvals,
    Delivery,
    DeliveryState,
    MessageDelivered,
    Signal,
    TurnEnded,
    TurnStarted,
    Write,
)
from subagent_host.backends.interactive.command_lines import CommandConversation

ITEM = ItemSpec(command=("cat",), prompt=None, cwd="/", env={})


def test_the_first_prompt_is_the_first_line_and_the_next_output_line_ends_its_turn() -> None:
    talk = CommandConversation.for_item(ITEM, Approvals.CLI)
    assert talk.opening("hello") == [Write(b"hello\n"), TurnStarted()]
    assert talk.turn_running
    assert talk.on_line(b"hi there") == [TurnEnded("end_turn")]
    assert not talk.turn_running
    assert talk.on_line(b"more output while waiting") == []


def test_no_prompt_means_waiting_from_the_start() -> None:
    talk = CommandConversation()
    assert talk.opening("") == []
    assert not talk.turn_running
    reactions, state = talk.send("m1", "ping", Delivery.QUEUE)
    assert (list(reactions), state) == ([Write(b"ping\n"), TurnStarted()], DeliveryState.DELIVERED)


def test_queue_waits_for_the_turn_end_and_steer_goes_at_once() -> None:
    talk = CommandConversation()
    talk.opening("first")
    queued, state = talk.send("m1", "later", Delivery.QUEUE)
    assert (list(queued), state) == ([], DeliveryState.QUEUED)
    assert talk.queued() == ["m1"]
    steered, state = talk.send("m2", "now", Delivery.STEER)
    assert (list(steered), state) == ([Write(b"now\n")], DeliveryState.DELIVERED)
    assert talk.on_line(b"answer") == [
        TurnEnded("end_turn"),
        Write(b"later\n"),
        MessageDelivered("m1"),
        TurnStarted(),
    ]
    assert talk.queued() == [] and talk.turn_running


def test_interrupt_sends_sigint_and_ends_the_turn_and_is_nothing_while_waiting() -> None:
    talk = CommandConversation()
    assert talk.interrupt() == []
    talk.opening("work")
    talk.send("m1", "next", Delivery.QUEUE)
    assert talk.interrupt() == [
        Signal(signal.SIGINT),
        TurnEnded("interrupted"),
        Write(b"next\n"),
        MessageDelivered("m1"),
        TurnStarted(),
    ]


def test_a_command_takes_only_cli_approvals_and_never_has_a_permission() -> None:
    for approvals in (Approvals.CLIENT, Approvals.POLICY):
        with pytest.raises(ValueError, match="approvals-unsupported"):
            CommandConversation.for_item(ITEM, approvals)
    with pytest.raises(KeyError):
        CommandConversation().answer("p1", "allow")
