"""The conversation with `codex app-server`, line by line, on conversations recorded from
the real CLI (fixtures/record_codex_app.py) and on lines that break its protocol."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import pytest

from subagent_host.backends.base import ItemSpec
from subagent_host.backends.codex import CodexBackend
from subagent_host.backends.events import MessageText, ToolEnded, ToolKind, ToolStarted, UsageSoFar
from subagent_host.backends.interactive.base import (
    OPENING,
    Approvals,
    Conversation,
    Delivery,
    DeliveryState,
    LeftRunning,
    MessageDelivered,
    MessageRefused,
    OptionKind,
    PermissionAsked,
    PermissionWithdrawn,
    ProtocolFailure,
    Reaction,
    TurnEnded,
    TurnEndedLeavingCommands,
    TurnStarted,
    Write,
)
from subagent_host.backends.interactive.codex_app import (
    CLIENT_INFO,
    CodexAppConversation,
    interactive_launch,
)
from subagent_host.values import LEAN
from tests.backends.fixtures.record_codex import MODEL

T = TypeVar("T")
FIXTURES: Final = Path(__file__).resolve().parent / "fixtures" / "interactive"
CWD: Final = "/work/dir"
PROMPT: Final = "list the files please"


def lines_of(name: str) -> list[bytes]:
    return (FIXTURES / f"codex_{name}.jsonl").read_bytes().splitlines()


def written(reactions: Sequence[Reaction]) -> list[dict[str, Any]]:
    """The JSON messages among the reactions' writes (each one line)."""
    messages = []
    for reaction in reactions:
        if isinstance(reaction, Write):
            assert reaction.data.endswith(b"\n") and reaction.data.count(b"\n") == 1
            messages.append(json.loads(reaction.data))
    return messages


def is_method(method: str) -> Callable[[bytes], bool]:
    return lambda line: json.loads(line).get("method") == method


def is_command_started(line: bytes) -> bool:
    message = json.loads(line)
    item = message.get("params", {}).get("item", {})
    return bool(message.get("method") == "item/started" and item["type"] == "commandExecution")


class Replay:
    """A recorded conversation fed line by line to a fresh conversation, which writes
    what it wrote when it was recorded (the same request ids)."""

    def __init__(self, name: str, *, ask: bool = False, prompt: str = PROMPT) -> None:
        self.lines = lines_of(name)
        self.conversation = CodexAppConversation(
            cwd=CWD, model=MODEL, approval_policy="untrusted" if ask else "never"
        )
        self.opening = list(self.conversation.opening(prompt))

    def until(self, stop: Callable[[bytes], bool]) -> list[Reaction]:
        """Feed lines up to and including the first that `stop` holds for."""
        reactions: list[Reaction] = []
        while self.lines:
            line = self.lines.pop(0)
            reactions += self.conversation.on_line(line)
            if stop(line):
                return reactions
        raise AssertionError("the recording ended first")

    def rest(self) -> list[Reaction]:
        return self.until(lambda line: not self.lines)


def of_type(reactions: Sequence[object], kind: type[T]) -> list[T]:
    return [reaction for reaction in reactions if isinstance(reaction, kind)]


def test_the_conversation_is_a_conversation() -> None:
    conversation: Conversation = CodexAppConversation(cwd=CWD)
    assert not conversation.turn_running and conversation.queued() == []
    # Before there is a thread a message can only wait for the first turn's end.
    reactions, state = conversation.send("m0", "early", Delivery.STEER)
    assert (list(reactions), state) == ([], DeliveryState.QUEUED)
    assert conversation.interrupt() == [] and conversation.queued() == ["m0"]


def test_the_handshake_the_thread_then_the_prompts_turn() -> None:
    replay = Replay("turns")
    assert written(replay.opening) == [
        {"id": 0, "method": "initialize", "params": {"clientInfo": dict(CLIENT_INFO)}}
    ]
    assert replay.conversation.turn_running  # what is sent now waits for the first turn
    handshake = written(replay.until(lambda line: json.loads(line).get("id") == 0))
    assert handshake == [
        {"method": "initialized"},
        {
            "id": 1,
            "method": "thread/start",
            "params": {"cwd": CWD, "approvalPolicy": "never", "sandbox": "workspace-write"}
            | {"model": MODEL},
        },
    ]
    turn = written(replay.until(lambda line: json.loads(line).get("id") == 1))
    thread_id = replay.conversation.session_id
    assert thread_id is not None
    assert turn == [
        {
            "id": 2,
            "method": "turn/start",
            "params": {"threadId": thread_id, "input": [{"type": "text", "text": PROMPT}]},
        }
    ]


def test_a_turn_with_a_tool_then_a_follow_up() -> None:
    replay = Replay("turns")
    first = replay.until(is_method("turn/completed"))
    events = [r for r in first if not isinstance(r, Write | UsageSoFar)]
    assert isinstance(events[0], TurnStarted)
    started, ended = of_type(events, ToolStarted), of_type(events, ToolEnded)
    assert [(s.name, s.kind, s.summary) for s in started] == [
        ("shell", ToolKind.EXECUTE, "/bin/bash -lc 'printf x > written.txt'")
    ]
    assert [(e.tool_id, e.is_error) for e in ended] == [(started[0].tool_id, False)]
    texts = of_type(events, MessageText)
    assert "".join(t.text for t in texts).startswith("MOCK-FINAL: scenario=after-tool")
    assert texts[-1].final
    assert events[-1] == TurnEnded("end_turn") and type(events[-1]) is TurnEnded
    usage = of_type(first, UsageSoFar)
    assert usage and usage[-1].usage.output_tokens > 0
    assert not replay.conversation.turn_running
    reactions, state = replay.conversation.send("m1", "ANSWER-NOW REPEAT:again", Delivery.QUEUE)
    assert state is DeliveryState.DELIVERED
    [turn] = written(reactions)
    assert turn["method"] == "turn/start"
    assert turn["params"]["input"] == [{"type": "text", "text": "ANSWER-NOW REPEAT:again"}]
    second = replay.rest()
    final = "".join(t.text for t in of_type(second, MessageText))
    assert final.endswith(" again") and second[-1] == TurnEnded("end_turn")
    assert replay.conversation.usage is not None
    assert replay.conversation.usage.input_tokens > usage[-1].usage.input_tokens


def test_a_message_sent_during_a_turn_is_queued_then_opens_the_next_turn() -> None:
    replay = Replay("messages")
    replay.until(is_method("turn/started"))
    reactions, state = replay.conversation.send("m1", "ANSWER-NOW REPEAT:queued", Delivery.QUEUE)
    assert (list(reactions), state) == ([], DeliveryState.QUEUED)
    assert replay.conversation.queued() == ["m1"]
    ended = replay.until(is_method("turn/completed"))
    at_end = ended[ended.index(TurnEnded("end_turn")) :]
    [turn] = written(at_end)
    assert turn["params"]["input"] == [{"type": "text", "text": "ANSWER-NOW REPEAT:queued"}]
    assert at_end[-1] == MessageDelivered("m1") and replay.conversation.queued() == []
    assert replay.conversation.turn_running  # its turn was asked for
    answered = replay.until(is_method("turn/completed"))
    assert "".join(t.text for t in of_type(answered, MessageText)).endswith(" queued")


def test_a_steered_message_joins_the_running_turn() -> None:
    replay = Replay("messages")
    replay.until(is_method("turn/completed"))
    replay.conversation.send("m1", "ANSWER-NOW REPEAT:queued", Delivery.QUEUE)
    replay.until(is_method("turn/completed"))
    replay.conversation.send("m2", "SLEEP-TOOL now", Delivery.QUEUE)
    replay.until(is_method("turn/started"))
    steered = "ANSWER-NOW REPEAT:steered"
    reactions, state = replay.conversation.send("m3", steered, Delivery.STEER)
    assert state is DeliveryState.DELIVERED
    [steer] = written(reactions)
    turn_started = [
        json.loads(line) for line in lines_of("messages") if is_method("turn/started")(line)
    ]
    assert steer["method"] == "turn/steer"
    assert steer["params"] == {
        "threadId": replay.conversation.session_id,
        "expectedTurnId": turn_started[-1]["params"]["turn"]["id"],
        "input": [{"type": "text", "text": steered}],
    }
    rest = replay.rest()
    assert not written(rest)  # codex took it: nothing is written again
    assert "".join(t.text for t in of_type(rest, MessageText)).endswith(" steered")
    assert rest[-1] == TurnEnded("end_turn")


def test_steer_without_a_running_turn_is_a_new_turn() -> None:
    replay = Replay("turns")
    replay.until(is_method("turn/completed"))
    reactions, state = replay.conversation.send("m1", "hello", Delivery.STEER)
    assert state is DeliveryState.DELIVERED
    assert [m["method"] for m in written(reactions)] == ["turn/start"]


def test_a_steer_codex_refuses_is_written_again_as_the_next_turn() -> None:
    replay = Replay("turns")
    replay.until(is_method("turn/started"))
    reactions, _ = replay.conversation.send("m1", "late", Delivery.STEER)
    [steer] = written(reactions)
    ended = replay.until(is_method("turn/completed"))
    assert ended[-1] == TurnEnded("end_turn") and not written(ended)
    refused = {"error": {"code": -32600, "message": "no active turn to steer"}, "id": steer["id"]}
    [turn] = written(replay.conversation.on_line(json.dumps(refused).encode()))
    assert turn["method"] == "turn/start"
    assert turn["params"]["input"] == [{"type": "text", "text": "late"}]


def test_an_interrupt_ends_the_turn_and_names_the_command_left_running() -> None:
    replay = Replay("interrupt", prompt="SLEEP-TOOL please")
    [started] = of_type(replay.until(is_command_started), ToolStarted)
    [interrupt] = written(replay.conversation.interrupt())
    turn_id = json.loads(
        next(line for line in lines_of("interrupt") if is_method("turn/started")(line))
    )["params"]["turn"]["id"]
    assert interrupt["method"] == "turn/interrupt"
    assert interrupt["params"] == {"threadId": replay.conversation.session_id, "turnId": turn_id}
    ended = replay.until(is_method("turn/completed"))
    left = LeftRunning(started.tool_id, "/bin/bash -lc 'sleep 300'")
    assert ended[-1] == TurnEndedLeavingCommands("interrupted", (left,))
    assert isinstance(ended[-1], TurnEnded) and ended[-1].stop_reason == "interrupted"
    # Its result never reaches the model: the call ended with the turn.
    assert ToolEnded(started.tool_id, "shell", ToolKind.EXECUTE, is_error=True) in ended
    assert replay.conversation.interrupt() == []  # no turn runs: nothing to do
    reactions, state = replay.conversation.send("m1", "ANSWER-NOW REPEAT:after", Delivery.QUEUE)
    assert state is DeliveryState.DELIVERED and written(reactions)[0]["method"] == "turn/start"
    rest = replay.rest()
    assert "".join(t.text for t in of_type(rest, MessageText)).endswith(" after")
    assert not of_type(rest, ToolStarted)  # nothing of the command is told again


def test_every_interrupted_turn_says_commands_may_be_left_running() -> None:
    replay = Replay("turns")
    started = json.loads(next(line for line in replay.lines if is_method("turn/started")(line)))
    replay.until(is_method("turn/started"))
    interrupted = {**started["params"]["turn"], "status": "interrupted"}
    line = {"method": "turn/completed", "params": {**started["params"], "turn": interrupted}}
    ended = replay.conversation.on_line(json.dumps(line).encode())
    assert ended[-1] == TurnEndedLeavingCommands("interrupted", ())


def test_an_interrupt_before_codex_names_the_turn_waits_for_its_id() -> None:
    replay = Replay("interrupt", prompt="SLEEP-TOOL please")
    replay.until(lambda line: json.loads(line).get("id") == 1)  # the thread; turn asked
    assert replay.conversation.interrupt() == []
    named = written(replay.until(lambda line: json.loads(line).get("id") == 2))
    assert [m["method"] for m in named] == ["turn/interrupt"]


def test_an_announced_command_an_interrupted_turn_leaves_is_named_and_ended() -> None:
    replay = Replay("approvals", ask=True, prompt="write it please")
    reactions = replay.until(is_method("item/commandExecution/requestApproval"))
    [asked] = of_type(reactions, PermissionAsked)
    [started] = of_type(reactions, ToolStarted)
    turn = json.loads(
        next(line for line in lines_of("approvals") if is_method("turn/started")(line))
    )["params"]
    interrupted = {**turn["turn"], "status": "interrupted"}
    line = json.dumps({"method": "turn/completed", "params": {**turn, "turn": interrupted}})
    ended = replay.conversation.on_line(line.encode())
    summary = "/bin/bash -lc 'printf x > written.txt'"
    assert ended[-1] == TurnEndedLeavingCommands(
        "interrupted", (LeftRunning(started.tool_id, summary),)
    )
    assert ToolEnded(started.tool_id, "shell", ToolKind.EXECUTE, is_error=True) in ended
    with pytest.raises(KeyError):  # codex settles its own requests when a turn ends
        replay.conversation.answer(asked.permission_id, "accept")


def test_approvals_are_asked_and_answered_with_codexs_decisions() -> None:
    replay = Replay("approvals", ask=True, prompt="write it please")
    handshake = written(replay.until(lambda line: json.loads(line).get("id") == 0))
    assert handshake[1]["params"]["approvalPolicy"] == "untrusted"
    reactions = replay.until(is_method("item/commandExecution/requestApproval"))
    [started] = of_type(reactions, ToolStarted)
    [asked] = of_type(reactions, PermissionAsked)
    assert asked.permission_id == "0" and asked.tool_id == started.tool_id
    assert (asked.name, asked.kind) == ("shell", ToolKind.EXECUTE)
    assert asked.summary == "/bin/bash -lc 'printf x > written.txt'"
    assert [(o.option_id, o.kind) for o in asked.options] == [
        ("accept", OptionKind.ALLOW_ONCE),
        ("acceptForSession", OptionKind.ALLOW_ALWAYS),
        ("decline", OptionKind.REJECT_ONCE),
        ("cancel", OptionKind.REJECT_ONCE),
    ]
    with pytest.raises(ValueError):
        replay.conversation.answer("0", "maybe")
    with pytest.raises(KeyError):
        replay.conversation.answer("7", "accept")
    assert written(replay.conversation.answer("0", "accept")) == [
        {"id": 0, "result": {"decision": "accept"}}
    ]
    with pytest.raises(KeyError):  # answered: no longer pending
        replay.conversation.answer("0", "accept")
    allowed = replay.until(is_method("turn/completed"))
    assert [e.is_error for e in of_type(allowed, ToolEnded)] == [False]
    replay.conversation.send("m1", "write again", Delivery.QUEUE)
    [asked] = of_type(
        replay.until(is_method("item/commandExecution/requestApproval")), PermissionAsked
    )
    assert written(replay.conversation.answer(asked.permission_id, "decline")) == [
        {"id": 1, "result": {"decision": "decline"}}
    ]
    declined = replay.rest()
    assert [e.is_error for e in of_type(declined, ToolEnded)] == [True]  # it never ran
    assert declined[-1] == TurnEnded("end_turn")


def test_a_file_change_approval_names_the_patched_files() -> None:
    conversation = CodexAppConversation(cwd=CWD, approval_policy="untrusted")
    change = {"path": "/work/dir/a.txt", "kind": {"type": "add"}, "diff": "x"}
    item = {"type": "fileChange", "id": "call_9", "status": "inProgress", "changes": [change]}
    params = {"threadId": "t", "turnId": "u", "startedAtMs": 1}
    conversation.on_line(
        json.dumps({"method": "item/started", "params": {**params, "item": item}}).encode()
    )
    request = {
        "method": "item/fileChange/requestApproval",
        "id": 4,
        "params": {**params, "itemId": "call_9"},
    }
    [asked] = conversation.on_line(json.dumps(request).encode())
    assert isinstance(asked, PermissionAsked)
    assert (asked.permission_id, asked.tool_id, asked.name) == ("4", "call_9", "apply_patch")
    assert (asked.kind, asked.summary) == (ToolKind.EDIT, "/work/dir/a.txt")
    assert written(conversation.answer("4", "acceptForSession")) == [
        {"id": 4, "result": {"decision": "acceptForSession"}}
    ]


def test_a_permission_codex_resolves_itself_is_no_longer_pending() -> None:
    conversation = CodexAppConversation(cwd=CWD, approval_policy="untrusted")
    params = {"threadId": "t", "turnId": "u", "itemId": "c", "startedAtMs": 1}
    request = {"method": "item/commandExecution/requestApproval", "id": "r1", "params": params}
    [asked] = conversation.on_line(json.dumps(request).encode())
    assert isinstance(asked, PermissionAsked) and asked.summary == ""
    resolved = {"method": "serverRequest/resolved", "params": {"threadId": "t", "requestId": "r1"}}
    assert conversation.on_line(json.dumps(resolved).encode()) == [
        PermissionWithdrawn("r1", "codex resolved it itself")
    ]
    assert conversation.on_line(json.dumps(resolved).encode()) == []  # said once
    with pytest.raises(KeyError):
        conversation.answer("r1", "accept")


@pytest.mark.parametrize(
    "method",
    ["item/tool/requestUserInput", "account/chatgptAuthTokens/refresh", "execCommandApproval"],
)
def test_any_other_request_of_codex_gets_an_error_at_once(method: str) -> None:
    conversation = CodexAppConversation(cwd=CWD)
    line = json.dumps({"method": method, "id": 12, "params": {}}).encode()
    [error] = written(conversation.on_line(line))
    assert error["id"] == 12 and error["error"]["code"] == -32601
    assert method in error["error"]["message"]


@pytest.mark.parametrize(
    "line",
    [
        b'{"method":"account/rateLimits/updated","params":{}}',
        b'{"method":"some/future/notification"}',
        b'{"method":"item/started","params":{"item":"not an item"}}',
        b'{"method":"turn/started","params":null}',
        b'{"id":99,"result":{}}',
        b'{"something":"else"}',
        b"   ",
    ],
)
def test_notifications_it_does_not_use_and_stray_answers_are_ignored(line: bytes) -> None:
    conversation = CodexAppConversation(cwd=CWD)
    reactions = conversation.on_line(line)
    assert not of_type(reactions, ProtocolFailure) and not written(reactions)


@pytest.mark.parametrize("line", [b"Error: not json", b"[1, 2]", b'"text"', b"\xff\xfe"])
def test_a_line_that_is_not_a_json_object_fails_the_protocol_then_nothing_more(
    line: bytes,
) -> None:
    conversation = CodexAppConversation(cwd=CWD)
    conversation.opening("hi")
    [failure] = conversation.on_line(line)
    assert isinstance(failure, ProtocolFailure)
    assert conversation.on_line(b'{"id":0,"result":{}}') == []


def test_codex_refusing_the_thread_fails_the_protocol() -> None:
    conversation = CodexAppConversation(cwd=CWD, model="no-such-model")
    conversation.opening("hi")
    conversation.on_line(b'{"id":0,"result":{}}')
    refused = b'{"id":1,"error":{"code":-32600,"message":"unknown model"}}'
    [failure] = conversation.on_line(refused)
    assert failure == ProtocolFailure("codex refused thread/start: unknown model")


def test_a_refused_turn_ends_it_with_an_error_and_starts_the_queued_messages() -> None:
    replay = Replay("turns")
    replay.until(lambda line: json.loads(line).get("id") == 1)
    replay.conversation.send("m1", "next", Delivery.QUEUE)
    refused = b'{"id":2,"error":{"code":-32603,"message":"busy"}}'
    reactions = replay.conversation.on_line(refused)
    assert reactions[:2] == [MessageRefused(OPENING, "busy"), TurnEnded("error")]
    assert [m["method"] for m in written(reactions)] == ["turn/start"]
    assert reactions[-1] == MessageDelivered("m1")


def test_a_resumed_session_resumes_its_thread() -> None:
    item = ItemSpec(
        command=None, prompt=None, cwd=CWD, env={}, model="openai/gpt-5", resume_session="th-1"
    )
    conversation = CodexAppConversation.for_item(item, Approvals.CLI)
    conversation.opening("again")
    [_, resume] = written(conversation.on_line(b'{"id":0,"result":{}}'))
    assert resume["method"] == "thread/resume"
    assert resume["params"] == {
        "threadId": "th-1",
        "cwd": CWD,
        "approvalPolicy": "never",
        "sandbox": "workspace-write",
        "model": "gpt-5",
    }


def test_the_launch_is_the_app_server_with_the_exec_launchs_sandbox_and_options() -> None:
    item = ItemSpec(
        command=None,
        prompt="p",
        cwd=CWD,
        env={"K": "v"},
        thinking="low",
        network_access=False,
        session_resources=LEAN,
    )
    launch = interactive_launch(CodexBackend(executable="/opt/codex"), item, Approvals.CLI)
    assert launch.argv[:2] == ("/opt/codex", "app-server") and launch.stdin is None
    assert launch.argv[2:] == (
        "-c",
        'sandbox_mode="workspace-write"',
        "-c",
        "sandbox_workspace_write.network_access=false",
        "-c",
        'web_search="disabled"',
        "-c",
        'model_reasoning_effort="low"',
        "-c",
        "project_doc_max_bytes=0",
        "-c",
        "skills.include_instructions=false",
        "--disable",
        "hooks",
        "--disable",
        "plugins",
        "--disable",
        "apps",
    )
    assert (launch.cwd, dict(launch.env)) == (CWD, {"K": "v"})
    read_only = ItemSpec(command=None, prompt="p", cwd=CWD, env={}, filesystem_access="read")
    assert (
        'sandbox_mode="read-only"'
        in interactive_launch(CodexBackend(), read_only, Approvals.CLIENT).argv
    )
    asking = CodexAppConversation.for_item(read_only, Approvals.CLIENT)
    [init] = written(asking.opening("p"))
    [_, thread] = written(asking.on_line(json.dumps({"id": init["id"], "result": {}}).encode()))
    assert thread["params"] == {"cwd": CWD, "approvalPolicy": "untrusted", "sandbox": "read-only"}
