"""pi's rpc-mode conversation, line by line, on conversations recorded from the real CLI
(tests/backends/fixtures/record_pi_rpc.py): the recorder's calls are made again at the
same lines, and what the conversation says must be what pi was answering."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from subagent_host.backends.base import ItemSpec
from subagent_host.backends.events import MessageText, ToolEnded, ToolStarted, UsageSoFar
from subagent_host.backends.interactive.base import (
    OPENING,
    Approvals,
    Conversation,
    Delivery,
    DeliveryState,
    MessageDelivered,
    MessageRefused,
    ProtocolFailure,
    Reaction,
    TurnEnded,
    TurnStarted,
    Write,
)
from subagent_host.backends.interactive.pi_rpc import PiRpcConversation, interactive_launch
from subagent_host.backends.pi import PiBackend
from tests.backends.fixtures.record_pi_rpc import FIRST, FOLLOW_UP, LONG_TOOL, QUEUED, STEERED
from tests.backends.test_agent_events import responses

FIXTURES = Path(__file__).resolve().parent / "fixtures"
AGENT_START = b'{"type":"agent_start"}'


def recorded(name: str) -> list[bytes]:
    return (FIXTURES / "interactive" / name).read_bytes().splitlines()


def written(reactions: Sequence[Reaction]) -> list[dict[str, Any]]:
    """The JSON objects the reactions write to pi, in order (each one line)."""
    found = []
    for reaction in reactions:
        if isinstance(reaction, Write):
            assert reaction.data.endswith(b"\n") and reaction.data.count(b"\n") == 1
            found.append(json.loads(reaction.data))
    return found


def replay(
    conversation: PiRpcConversation,
    lines: list[bytes],
    calls: dict[str, Callable[[], Sequence[Reaction]]],
) -> list[Reaction]:
    """Feed every line; after the first line of each event type named in `calls`, make
    that call (as the recorder did) and keep what it says too."""
    reactions: list[Reaction] = []
    for line in lines:
        reactions += conversation.on_line(line)
        call = calls.pop(json.loads(line)["type"], None)
        if call is not None:
            reactions += call()
    assert calls == {}, "every call was made"
    return reactions


def answered_ids(lines: list[bytes]) -> list[str]:
    return [event["id"] for event in map(json.loads, lines) if event["type"] == "response"]


def final_texts(reactions: Sequence[Reaction]) -> list[str]:
    """Each model response's whole text, from the text events."""
    return responses([r for r in reactions if isinstance(r, MessageText)])


def turns(reactions: Sequence[Reaction]) -> list[Reaction]:
    kinds = (TurnStarted, TurnEnded, MessageDelivered)
    return [reaction for reaction in reactions if isinstance(reaction, kinds)]


def test_a_pi_conversation_is_a_conversation() -> None:
    conversation: Conversation = PiRpcConversation()
    assert conversation.turn_running is False


def test_the_opening_asks_pi_for_its_state_then_prompts_and_starts_the_turn() -> None:
    conversation = PiRpcConversation()
    reactions = conversation.opening(FIRST)
    assert written(reactions) == [
        {"id": "subagent-host-1", "type": "get_state"},
        {
            "id": "subagent-host-2",
            "type": "prompt",
            "message": FIRST,
            "streamingBehavior": "followUp",
        },
    ]
    assert reactions[-1] == TurnStarted() and conversation.turn_running


def test_a_follow_up_after_the_first_turn_is_delivered_as_its_own_turn() -> None:
    lines = recorded("pi_follow_up.jsonl")
    conversation = PiRpcConversation()
    reactions = list(conversation.opening(FIRST))
    sent: list[DeliveryState] = []

    def follow_up() -> Sequence[Reaction]:
        assert not conversation.turn_running
        said, state = conversation.send("m2", FOLLOW_UP, Delivery.QUEUE)
        sent.append(state)
        return said

    reactions += replay(conversation, lines, {"agent_end": follow_up})
    assert sent == [DeliveryState.DELIVERED]
    assert turns(reactions) == [
        TurnStarted(),
        TurnEnded("end_turn"),
        TurnStarted(),
        TurnEnded("end_turn"),
    ]
    prompts = [w for w in written(reactions) if w["type"] == "prompt"]
    assert [p["message"] for p in prompts] == [FIRST, FOLLOW_UP]
    # pi answered exactly the commands written, in order.
    assert answered_ids(lines) == [w["id"] for w in written(reactions)]
    first, second = final_texts(reactions)
    assert first.startswith("MOCK-FINAL:") and first.endswith(" one")
    assert second.endswith(" two")
    state = json.loads(lines[0])["data"]
    assert conversation.session_id == state["sessionId"] and conversation.session_id
    usage = [r.usage for r in reactions if isinstance(r, UsageSoFar)]
    assert len(usage) == 2 and usage[1].input_tokens > usage[0].input_tokens > 0
    assert not conversation.turn_running and conversation.queued() == []


def test_a_steer_joins_the_running_turn_and_a_queued_message_waits_for_its_end() -> None:
    lines = recorded("pi_queue_and_steer.jsonl")
    conversation = PiRpcConversation()
    reactions = list(conversation.opening(LONG_TOOL))
    states: list[DeliveryState] = []

    def during_the_tool() -> Sequence[Reaction]:
        steered, steer_state = conversation.send("s1", STEERED, Delivery.STEER)
        queued, queue_state = conversation.send("q1", QUEUED, Delivery.QUEUE)
        states.extend((steer_state, queue_state))
        assert queued == [] and conversation.queued() == ["q1"]
        assert written(steered) == [
            {
                "id": "subagent-host-3",
                "type": "prompt",
                "message": STEERED,
                "streamingBehavior": "steer",
            }
        ]
        return steered

    reactions += replay(conversation, lines, {"tool_execution_start": during_the_tool})
    assert states == [DeliveryState.DELIVERED, DeliveryState.QUEUED]
    # The steered message is answered in the first turn; the queued one is the next turn.
    assert turns(reactions) == [
        TurnStarted(),
        TurnEnded("end_turn"),
        MessageDelivered("q1"),
        TurnStarted(),
        TurnEnded("end_turn"),
    ]
    delivered = reactions.index(MessageDelivered("q1"))
    assert written(reactions[delivered - 1 : delivered])[0]["message"] == QUEUED
    texts = final_texts(reactions)
    assert texts[-2].endswith(" steered") and texts[-1].endswith(" queued")
    assert answered_ids(lines) == [w["id"] for w in written(reactions)]
    assert conversation.queued() == []


def test_an_interrupt_mid_tool_ends_the_turn_interrupted_and_the_queued_message_follows() -> None:
    lines = recorded("pi_interrupt.jsonl")
    conversation = PiRpcConversation()
    reactions = list(conversation.opening(LONG_TOOL))
    aborts: list[Sequence[Reaction]] = []

    def during_the_tool() -> Sequence[Reaction]:
        queued, state = conversation.send("q1", QUEUED, Delivery.QUEUE)
        assert state is DeliveryState.QUEUED and queued == []
        aborts.append(conversation.interrupt())
        assert conversation.interrupt() == []  # asked once is enough
        return aborts[0]

    reactions += replay(conversation, lines, {"tool_execution_start": during_the_tool})
    assert written(aborts[0]) == [{"id": "subagent-host-3", "type": "abort"}]
    tools = [r for r in reactions if isinstance(r, ToolStarted | ToolEnded)]
    assert [type(t).__name__ for t in tools] == ["ToolStarted", "ToolEnded"]
    assert isinstance(tools[1], ToolEnded) and tools[1].is_error
    assert turns(reactions) == [
        TurnStarted(),
        TurnEnded("interrupted"),
        MessageDelivered("q1"),
        TurnStarted(),
        TurnEnded("end_turn"),
    ]
    assert final_texts(reactions)[-1].endswith(" queued")
    assert answered_ids(lines) == [w["id"] for w in written(reactions)]
    assert conversation.interrupt() == []  # no turn runs


def test_an_interrupt_or_a_steer_before_pi_began_the_run_waits_for_agent_start() -> None:
    conversation = PiRpcConversation()
    conversation.opening(FIRST)
    said, state = conversation.send("s1", STEERED, Delivery.STEER)
    assert (said, state) == ([], DeliveryState.QUEUED)
    assert conversation.queued() == ["s1"]
    assert conversation.interrupt() == []
    reactions = conversation.on_line(AGENT_START)
    assert written(reactions) == [
        {
            "id": "subagent-host-3",
            "type": "prompt",
            "message": STEERED,
            "streamingBehavior": "steer",
        },
        {"id": "subagent-host-4", "type": "abort"},
    ]
    assert MessageDelivered("s1") in reactions and conversation.queued() == []
    assert conversation.interrupt() == []


def test_a_steer_pi_takes_after_its_run_ended_is_a_turn_pi_started() -> None:
    conversation = PiRpcConversation()
    conversation.opening(FIRST)
    conversation.on_line(AGENT_START)
    said, state = conversation.send("s1", STEERED, Delivery.STEER)
    assert state is DeliveryState.DELIVERED and written(said)[0]["streamingBehavior"] == "steer"
    ended = conversation.on_line(b'{"type":"agent_end","messages":[]}')
    assert ended == [TurnEnded("end_turn")] and not conversation.turn_running
    # pi was idle when the steer came: it ran it as a prompt of its own.
    assert conversation.on_line(AGENT_START) == [TurnStarted()]
    assert conversation.turn_running


def test_a_refused_steer_is_refused_alone_and_the_turn_goes_on() -> None:
    conversation = PiRpcConversation()
    conversation.opening(FIRST)
    conversation.on_line(AGENT_START)
    said, _ = conversation.send("m7", STEERED, Delivery.STEER)
    (steer,) = written(said)
    refusal = {
        "id": steer["id"],
        "type": "response",
        "command": "prompt",
        "success": False,
        "error": "No API key found for mock.",
    }
    reactions = conversation.on_line(json.dumps(refusal).encode())
    assert reactions == [MessageRefused("m7", "No API key found for mock.")]
    assert conversation.turn_running
    assert conversation.on_line(b'{"type":"agent_end","messages":[]}') == [TurnEnded("end_turn")]


def refusal_of(write: Reaction) -> bytes:
    assert isinstance(write, Write)
    command_id = json.loads(write.data)["id"]
    refusal = {"id": command_id, "type": "response", "command": "prompt", "success": False}
    return json.dumps({**refusal, "error": "No API key found for mock."}).encode()


def test_a_refused_prompt_ends_the_turn_it_opened_and_the_queue_goes_on() -> None:
    conversation = PiRpcConversation()
    _, prompt, _ = conversation.opening(FIRST)
    said, state = conversation.send("q1", QUEUED, Delivery.QUEUE)
    assert state is DeliveryState.QUEUED and said == []
    reactions = conversation.on_line(refusal_of(prompt))
    assert reactions[:2] == [
        MessageRefused(OPENING, "No API key found for mock."),
        TurnEnded("error"),
    ]
    assert [json.loads(w.data)["message"] for w in reactions if isinstance(w, Write)] == [QUEUED]
    assert reactions[-2:] == [MessageDelivered("q1"), TurnStarted()]
    assert conversation.turn_running
    # pi refuses the delivered one too: the conversation waits for the next message.
    queued_prompt = next(w for w in reactions if isinstance(w, Write))
    assert conversation.on_line(refusal_of(queued_prompt)) == [
        MessageRefused("q1", "No API key found for mock."),
        TurnEnded("error"),
    ]
    assert not conversation.turn_running
    said, state = conversation.send("m2", FOLLOW_UP, Delivery.QUEUE)
    assert state is DeliveryState.DELIVERED and TurnStarted() in said


@pytest.mark.parametrize("approvals", [Approvals.CLIENT, Approvals.POLICY])
def test_pi_refuses_approvals_it_cannot_ask(tmp_path: Path, approvals: Approvals) -> None:
    backend = PiBackend(tmp_path / "sessions", executable="/opt/pi")
    item = ItemSpec(command=None, prompt="the task", cwd=str(tmp_path), env={})
    with pytest.raises(ValueError, match="approvals-unsupported"):
        interactive_launch(backend, item, approvals)
    with pytest.raises(ValueError, match="approvals-unsupported"):
        PiRpcConversation.for_item(item, approvals)


def test_a_line_pi_could_not_read_fails_the_conversation() -> None:
    conversation = PiRpcConversation()
    conversation.opening(FIRST)
    unread = b'{"type":"response","command":"parse","success":false,"error":"Unexpected token"}'
    assert conversation.on_line(unread) == [
        ProtocolFailure("pi refused a command (parse): Unexpected token")
    ]


@pytest.mark.parametrize("line", [b"Warning: not json", b"[1, 2]", b'"text"', b"{broken"])
def test_a_line_that_is_not_a_json_object_is_a_protocol_failure(line: bytes) -> None:
    conversation = PiRpcConversation()
    conversation.opening(FIRST)
    (failure,) = conversation.on_line(line)
    assert isinstance(failure, ProtocolFailure) and "not a JSON object" in failure.reason


def test_unknown_events_and_answers_to_others_are_ignored() -> None:
    conversation = PiRpcConversation()
    conversation.opening(FIRST)
    for line in (
        b'{"type":"something_new","x":1}',
        b'{"type":"queue_update","steering":[],"followUp":[]}',
        b'{"id":"not-ours","type":"response","command":"prompt","success":false,"error":"x"}',
        b"",
    ):
        assert conversation.on_line(line) == []
    assert conversation.turn_running


def test_an_extension_dialog_is_dismissed_at_once_and_a_notice_ignored() -> None:
    conversation = PiRpcConversation()
    dialog = {"type": "extension_ui_request", "id": "u1", "method": "confirm", "title": "Ok?"}
    assert written(conversation.on_line(json.dumps(dialog).encode())) == [
        {"type": "extension_ui_response", "id": "u1", "cancelled": True}
    ]
    notice = {"type": "extension_ui_request", "id": "u2", "method": "notify", "message": "hi"}
    assert conversation.on_line(json.dumps(notice).encode()) == []


def test_pi_asks_no_permission_so_none_can_be_answered() -> None:
    with pytest.raises(KeyError):
        PiRpcConversation().answer("p1", "allow-once")


def test_a_request_pi_retries_after_its_failed_run_ended_is_a_turn_pi_started() -> None:
    # Recorded in `--mode json`, whose events are rpc mode's: agent_end, then the retry.
    lines = (FIXTURES / "pi" / "server_down_retries.jsonl").read_bytes().splitlines()
    conversation = PiRpcConversation()
    conversation.opening("hello")
    reactions = [r for line in lines for r in conversation.on_line(line)]
    assert turns(reactions) == [TurnEnded("error"), TurnStarted()] * 3 + [TurnEnded("error")]
    assert not conversation.turn_running


def test_a_message_is_written_as_one_ascii_line_whatever_its_text() -> None:
    conversation = PiRpcConversation()
    text = "line\nbreak \u2028 sep \ud800 lone, caf\u00e9"
    (prompt, _) = conversation.opening(text)[1:]
    assert isinstance(prompt, Write) and prompt.data.isascii()
    assert json.loads(prompt.data)["message"] == text


def test_the_interactive_launch_is_the_one_shot_launch_in_rpc_mode_with_stdin_open(
    tmp_path: Path,
) -> None:
    backend = PiBackend(tmp_path / "sessions", executable="/opt/pi")
    item = ItemSpec(
        command=None,
        prompt="the task",
        cwd=str(tmp_path),
        env={"A": "1"},
        model="mock/mock-model",
        tools=("read",),
        resume_session="abc",
        instructions="be brief",
    )
    one_shot, interactive = backend.prepare(item), interactive_launch(backend, item, Approvals.CLI)
    assert interactive.stdin is None and one_shot.stdin == b"the task"
    mode = one_shot.argv.index("--mode") + 1
    assert (one_shot.argv[mode], interactive.argv[mode]) == ("json", "rpc")
    assert interactive.argv[:mode] + interactive.argv[mode + 1 :] == (
        one_shot.argv[:mode] + one_shot.argv[mode + 1 :]
    )
    assert (interactive.env, interactive.cwd) == (one_shot.env, one_shot.cwd)
