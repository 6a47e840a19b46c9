"""The interactive Claude Code conversation, line by line, on conversations recorded from
the real CLI (tests/backends/fixtures/record_claude_stream.py), and on lines it may
print that no recording holds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from subagent_host.backends.base import ItemSpec
from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.events import MessageText, ToolEnded, ToolKind, ToolStarted
from subagent_host.backends.interactive.base import (
    Approvals,
    Delivery,
    DeliveryState,
    MessageDelivered,
    OptionKind,
    PermissionAsked,
    PermissionWithdrawn,
    ProtocolFailure,
    Reaction,
    TurnEnded,
    TurnStarted,
    Write,
)
from subagent_host.backends.interactive.claude_stream import (
    STREAM_ARGS,
    ClaudeConversation,
    interactive_launch,
)
from tests.backends.fixtures.record_claude_stream import WRITE_COMMAND, Seen, numbered_uuids

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "interactive"
R = TypeVar("R")


class Replay(Seen):
    """A recording fed to a conversation line by line, up to the reaction a step waits for
    (as the recording's driver did, live)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.lines = (FIXTURES / f"claude_{name}.jsonl").read_bytes().splitlines()
        self.conversation = ClaudeConversation(numbered_uuids())
        self._next_line = 0

    def do(self, reactions: Sequence[Reaction]) -> list[Reaction]:
        self.seen += reactions
        return list(reactions)

    def next(self, kind: type[R]) -> R:
        while (reaction := self.take(kind)) is None:
            assert self._next_line < len(self.lines), f"no {kind.__name__} in the recording"
            self.do(self.conversation.on_line(self.lines[self._next_line]))
            self._next_line += 1
        return reaction

    def through(self, marker: bytes) -> None:
        """Feed the lines up to the next one holding `marker`, that one included."""
        while True:
            line = self.lines[self._next_line]
            self.do(self.conversation.on_line(line))
            self._next_line += 1
            if marker in line:
                return

    def rest(self) -> list[Reaction]:
        """Feed the remaining lines; what they caused."""
        start = len(self.seen)
        for line in self.lines[self._next_line :]:
            self.do(self.conversation.on_line(line))
        self._next_line = len(self.lines)
        return self.seen[start:]


def written(reactions: Sequence[Reaction]) -> list[dict[str, Any]]:
    messages = []
    for reaction in reactions:
        if isinstance(reaction, Write):
            assert reaction.data.endswith(b"\n") and reaction.data.count(b"\n") == 1
            messages.append(json.loads(reaction.data))
    return messages


def text_of(reactions: Sequence[Reaction]) -> str:
    return "".join(r.text for r in reactions if isinstance(r, MessageText))


def user_message(text: str, number: int) -> dict[str, Any]:
    uuid = f"00000000-0000-4000-8000-{number:012d}"
    return {"type": "user", "message": {"role": "user", "content": text}, "uuid": uuid}


def test_a_prompt_and_a_follow_up_are_two_turns_each_answered() -> None:
    replay = Replay("turns")
    opened = replay.do(replay.conversation.opening("ANSWER-NOW hello REPEAT:first"))
    assert written(opened) == [user_message("ANSWER-NOW hello REPEAT:first", 1)]
    assert isinstance(opened[-1], TurnStarted) and replay.conversation.turn_running
    start = len(replay.seen)
    assert replay.next(TurnEnded) == TurnEnded("end_turn")
    assert text_of(replay.seen[start:]).endswith(" first")
    assert not replay.conversation.turn_running
    assert replay.conversation.session_id is not None
    # Sent while no turn runs, a queued message is written at once and starts a turn.
    reactions, state = replay.conversation.send("m1", "ANSWER-NOW REPEAT:second", Delivery.QUEUE)
    assert state is DeliveryState.DELIVERED and replay.conversation.queued() == []
    assert written(replay.do(reactions)) == [user_message("ANSWER-NOW REPEAT:second", 2)]
    assert isinstance(reactions[-1], TurnStarted)
    start = len(replay.seen)
    assert replay.next(TurnEnded) == TurnEnded("end_turn")
    assert text_of(replay.seen[start:]).endswith(" second")
    assert replay.rest() == [] and not replay.conversation.turn_running


def test_an_interrupt_ends_the_turn_interrupted_and_the_next_message_is_answered() -> None:
    replay = Replay("interrupt")
    replay.do(replay.conversation.opening("SLEEP-TOOL please"))
    tool = replay.next(ToolStarted)
    assert tool.kind is ToolKind.EXECUTE and tool.summary == "sleep 300"
    request = written(replay.do(replay.conversation.interrupt()))
    assert request == [
        {
            "type": "control_request",
            "request_id": "interrupt-1",
            "request": {"subtype": "interrupt"},
        }
    ]
    start = len(replay.seen)
    assert replay.next(TurnEnded) == TurnEnded("interrupted")
    # The killed tool is reported ended, failed, before the turn's end.
    assert ToolEnded(tool.tool_id, "Bash", ToolKind.EXECUTE, is_error=True) in replay.seen[start:]
    assert replay.conversation.interrupt() == []  # no turn runs: nothing to interrupt
    reactions, state = replay.conversation.send("m1", "ANSWER-NOW REPEAT:after", Delivery.STEER)
    assert state is DeliveryState.DELIVERED
    replay.do(reactions)
    start = len(replay.seen)
    assert replay.next(TurnEnded) == TurnEnded("end_turn")
    # Claude Code sends it in one message with the interrupted tool's result: the mock
    # answers that (the end-to-end test sees the model get the text).
    assert text_of(replay.seen[start:]).startswith("MOCK-FINAL:")
    assert replay.rest() == []


def test_steered_and_queued_messages_while_a_permission_is_pending() -> None:
    replay = Replay("steer_and_queue")
    replay.do(replay.conversation.opening("write it please"))
    asked = replay.next(PermissionAsked)
    assert (asked.name, asked.kind, asked.summary) == ("Bash", ToolKind.EXECUTE, WRITE_COMMAND)
    assert asked.tool_id is not None and asked.tool_id.startswith("toolu_")
    assert [option.kind for option in asked.options] == list(OptionKind)
    steer, state = replay.conversation.send("m1", "ANSWER-NOW REPEAT:steered", Delivery.STEER)
    assert state is DeliveryState.DELIVERED
    assert written(replay.do(steer)) == [user_message("ANSWER-NOW REPEAT:steered", 2)]
    queue, state = replay.conversation.send("m2", "ANSWER-NOW REPEAT:queued", Delivery.QUEUE)
    assert (queue, state) == ([], DeliveryState.QUEUED)
    assert replay.conversation.queued() == ["m2"]
    allow = written(replay.do(replay.conversation.answer(asked.permission_id, "allow-once")))
    assert allow == [
        {
            "type": "control_response",
            "response": {
                "subtype": "success",
                "request_id": asked.permission_id,
                "response": {"behavior": "allow", "updatedInput": {"command": WRITE_COMMAND}},
            },
        }
    ]
    with pytest.raises(KeyError):  # answered already
        replay.conversation.answer(asked.permission_id, "allow-once")
    again = replay.next(PermissionAsked)
    deny = written(replay.do(replay.conversation.answer(again.permission_id, "reject-once")))
    assert deny[0]["response"]["response"]["behavior"] == "deny"
    # The steered message joined the running turn: one end for both, then the queued one.
    first_end = replay.next(TurnEnded)
    assert first_end == TurnEnded("end_turn")
    after_end = replay.seen[replay.seen.index(first_end) + 1 :]
    assert after_end[1:] == [TurnStarted(), MessageDelivered("m2")]
    assert written(after_end) == [user_message("ANSWER-NOW REPEAT:queued", 3)]
    assert replay.conversation.queued() == [] and replay.conversation.turn_running
    start = len(replay.seen)
    assert replay.next(TurnEnded) == TurnEnded("end_turn")
    assert text_of(replay.seen[start:]).endswith(" queued")
    assert replay.rest() == [] and not replay.conversation.turn_running


def test_allow_always_sends_the_suggested_rules_for_the_session_only() -> None:
    replay = Replay("allow_always")
    replay.do(replay.conversation.opening("write it please"))
    asked = replay.next(PermissionAsked)
    request = json.loads(next(line for line in replay.lines if b"can_use_tool" in line))
    suggestions = request["request"]["permission_suggestions"]
    assert any(s.get("destination") == "localSettings" for s in suggestions)
    answer = written(replay.do(replay.conversation.answer(asked.permission_id, "allow-always")))
    decision = answer[0]["response"]["response"]
    assert decision["behavior"] == "allow" and decision["updatedInput"] == {
        "command": WRITE_COMMAND
    }
    assert decision["updatedPermissions"] == [{**s, "destination": "session"} for s in suggestions]
    assert replay.next(TurnEnded) == TurnEnded("end_turn")
    replay.do(replay.conversation.send("m1", "write it again", Delivery.QUEUE)[0])
    # Claude Code 2.1.197 asks for the same command again all the same.
    again = replay.next(PermissionAsked)
    replay.do(replay.conversation.answer(again.permission_id, "allow-once"))
    assert replay.next(TurnEnded) == TurnEnded("end_turn")
    assert replay.rest() == []


def test_a_rejected_tool_fails_and_the_turn_goes_on_to_its_end() -> None:
    replay = Replay("reject")
    replay.do(replay.conversation.opening("write it please"))
    asked = replay.next(PermissionAsked)
    with pytest.raises(ValueError, match="not an option"):
        replay.conversation.answer(asked.permission_id, "maybe")
    replay.do(replay.conversation.answer(asked.permission_id, "reject-always"))
    start = len(replay.seen)
    assert replay.next(TurnEnded) == TurnEnded("end_turn")
    assert (
        ToolEnded(str(asked.tool_id), "Bash", ToolKind.EXECUTE, is_error=True)
        in (replay.seen[start:])
    )
    assert text_of(replay.seen[start:]).startswith("MOCK-FINAL: scenario=after-tool")


def test_a_line_that_is_not_a_json_object_fails_the_protocol_once() -> None:
    conversation = ClaudeConversation()
    conversation.opening("hello")
    assert conversation.on_line(b"") == [] and conversation.on_line(b"   ") == []
    assert conversation.on_line(b'{"type":"some_new_notice","x":1}') == []
    (failure,) = conversation.on_line(b"[1, 2]")
    assert isinstance(failure, ProtocolFailure) and "not a JSON object" in failure.reason
    assert conversation.on_line(b'{"type":"result","subtype":"success"}') == []


def test_a_request_it_does_not_handle_gets_an_error_answer_at_once() -> None:
    conversation = ClaudeConversation()
    line = {"type": "control_request", "request_id": "r9", "request": {"subtype": "mcp_message"}}
    (answer,) = written(conversation.on_line(json.dumps(line).encode()))
    assert answer["type"] == "control_response"
    assert answer["response"]["subtype"] == "error" and answer["response"]["request_id"] == "r9"
    assert "mcp_message" in answer["response"]["error"]
    no_id = {"type": "control_request", "request": {"subtype": "interrupt"}}
    assert conversation.on_line(json.dumps(no_id).encode()) == []


def test_a_withdrawn_permission_is_no_longer_pending() -> None:
    conversation = ClaudeConversation()
    conversation.opening("write")
    ask = {
        "type": "control_request",
        "request_id": "p1",
        "request": {"subtype": "can_use_tool", "tool_name": "Write", "input": {"file_path": "a"}},
    }
    (asked,) = conversation.on_line(json.dumps(ask).encode())
    assert isinstance(asked, PermissionAsked) and asked.kind is ToolKind.EDIT
    assert asked.summary == "a" and asked.tool_id is None
    # Without suggestions allow-always is allow-once: no rules go with it.
    (allow,) = written(conversation.answer("p1", "allow-always"))
    assert "updatedPermissions" not in allow["response"]["response"]
    conversation.on_line(json.dumps(ask).encode())
    conversation.on_line(b'{"type":"control_cancel_request","request_id":"p1"}')
    with pytest.raises(KeyError):
        conversation.answer("p1", "allow-once")


def test_a_steered_message_the_turn_did_not_take_starts_the_next_turn() -> None:
    conversation = ClaudeConversation(numbered_uuids())
    conversation.opening("SLEEP-TOOL")
    conversation.on_line(json.dumps({"type": "user", "isReplay": True, "uuid": _uuid(1)}).encode())
    conversation.send("m1", "more", Delivery.STEER)
    conversation.interrupt()
    result = {"type": "result", "subtype": "error_during_execution", "is_error": True}
    reactions = conversation.on_line(json.dumps(result).encode())
    assert [r for r in reactions if not isinstance(r, MessageText)][-2:] == [
        TurnEnded("interrupted"),
        TurnStarted(),  # Claude Code starts one for the message itself
    ]
    assert conversation.turn_running
    conversation.on_line(json.dumps({"type": "user", "isReplay": True, "uuid": _uuid(2)}).encode())
    success = {"type": "result", "subtype": "success", "is_error": False}
    assert conversation.on_line(json.dumps(success).encode())[-1] == TurnEnded("end_turn")
    assert not conversation.turn_running


@pytest.mark.parametrize(
    ("subtype", "is_error", "reason"),
    [
        ("success", True, "error"),
        ("error_max_turns", True, "max_turns"),
        ("error_during_execution", True, "error"),  # not after an interrupt of ours
        ("error_something_new", True, "error"),
    ],
)
def test_a_result_s_subtype_is_the_stop_reason(subtype: str, is_error: bool, reason: str) -> None:
    conversation = ClaudeConversation(numbered_uuids())
    conversation.opening("hello")
    conversation.on_line(json.dumps({"type": "user", "isReplay": True, "uuid": _uuid(1)}).encode())
    result = {"type": "result", "subtype": subtype, "is_error": is_error}
    assert conversation.on_line(json.dumps(result).encode())[-1] == TurnEnded(reason)


def _uuid(number: int) -> str:
    return f"00000000-0000-4000-8000-{number:012d}"


def test_the_launch_is_the_one_shot_child_s_talked_to_on_stdin() -> None:
    backend = ClaudeBackend(executable="claude")
    item = ItemSpec(
        command=None, prompt="p", cwd="/w", env={"A": "1"}, model="m", tools=("Bash", "Read")
    )
    one_shot = backend.prepare(item).argv
    launch = interactive_launch(backend, item, Approvals.CLI)
    assert launch.stdin is None and launch.cwd == "/w" and launch.env == {"A": "1"}
    assert launch.argv[:8] == ("claude", *STREAM_ARGS)
    assert "--replay-user-messages" in STREAM_ARGS  # the echoes that say a message was taken
    assert launch.argv[8:] == one_shot[5:]  # what the child is, as a one-shot child's
    for approvals in (Approvals.CLIENT, Approvals.POLICY):
        asking = interactive_launch(backend, item, approvals).argv
        assert asking[8:11] == ("--permission-mode", "default", "--permission-prompt-tool")
        assert asking[11] == "stdio" and "--allowedTools" not in asking
        assert "--tools" in asking


def test_lone_surrogates_in_a_line_are_mended() -> None:
    conversation = ClaudeConversation()
    conversation.opening("hello")
    assistant = {
        "type": "assistant",
        "message": {"id": "m1", "content": [{"type": "text", "text": "a\\ud800b"}]},
        "parent_tool_use_id": None,
    }
    line = json.dumps(assistant).replace("\\\\ud800", "\\ud800").encode()
    assert b"\\ud800" in line
    conversation.on_line(line)
    result = {"type": "result", "subtype": "success", "is_error": False}
    reactions = conversation.on_line(json.dumps(result).encode())
    assert text_of(reactions) == "a\ufffdb"


def test_an_interrupt_while_asking_withdraws_the_permission() -> None:
    replay = Replay("interrupt_asking")
    replay.do(replay.conversation.opening("write it please"))
    asked = replay.next(PermissionAsked)
    replay.do(replay.conversation.interrupt())
    replay.through(b'"control_cancel_request"')
    assert replay.take(PermissionWithdrawn) == PermissionWithdrawn(
        asked.permission_id, "claude withdrew it"
    )
    with pytest.raises(KeyError):
        replay.conversation.answer(asked.permission_id, "allow-once")
    assert replay.next(TurnEnded) == TurnEnded("interrupted")
    assert replay.rest() == [] and not replay.conversation.turn_running
