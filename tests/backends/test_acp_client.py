"""The ACP client conversation, line by line, on conversations recorded from Qwen Code
(fixtures/record_acp.py) and on lines that break the protocol."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import pytest

from subagent_host.backends.base import ItemSpec
from subagent_host.backends.events import (
    MessageText,
    PlanEntry,
    PlanUpdated,
    ToolEnded,
    ToolKind,
    ToolStarted,
    UsageSoFar,
)
from subagent_host.backends.interactive.acp_client import (
    AcpConversation,
    Mode,
    interactive_launch,
)
from subagent_host.backends.interactive.base import (
    OPENING,
    Approvals,
    Conversation,
    Delivery,
    DeliveryState,
    MessageDelivered,
    MessageRefused,
    OptionKind,
    PermissionAsked,
    PermissionWithdrawn,
    ProtocolFailure,
    Reaction,
    TurnEnded,
    TurnStarted,
    Write,
)
from subagent_host.values.choices import PlanPriority, PlanStatus
from tests.backends.test_codex_app import of_type, written

FIXTURES: Final = Path(__file__).resolve().parent / "fixtures" / "interactive"
CWD: Final = "/work/dir"
PROMPT: Final = "list the files please"
SESSION: Final = "s-1"


def lines_of(name: str) -> list[bytes]:
    return (FIXTURES / f"acp_qwen_{name}.jsonl").read_bytes().splitlines()


def answers(request_id: int) -> Callable[[bytes], bool]:
    def holds(line: bytes) -> bool:
        message = json.loads(line)
        return "method" not in message and message.get("id") == request_id

    return holds


def is_method(method: str) -> Callable[[bytes], bool]:
    return lambda line: json.loads(line).get("method") == method


def text_of(reactions: Sequence[object]) -> str:
    return "".join(t.text for t in of_type(reactions, MessageText))


class Replay:
    """A recorded conversation fed line by line to a fresh conversation, which writes
    what it wrote when it was recorded (the same request ids)."""

    def __init__(
        self,
        name: str,
        *,
        prompt: str = PROMPT,
        mode: str | None = "yolo",
        resume: str | None = None,
    ) -> None:
        self.lines = lines_of(name)
        self.conversation = AcpConversation(cwd=CWD, resume_session=resume, mode=mode)
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


def test_the_conversation_is_a_conversation() -> None:
    conversation: Conversation = AcpConversation(cwd=CWD)
    assert not conversation.turn_running and conversation.queued() == []
    conversation.opening(PROMPT)
    # Before there is a session a message can only wait for the first turn's end.
    reactions, state = conversation.send("m0", "early", Delivery.STEER)
    assert (list(reactions), state) == ([], DeliveryState.QUEUED)
    assert conversation.interrupt() == [] and conversation.queued() == ["m0"]


def test_the_launch_is_the_configured_agent_in_the_items_cwd() -> None:
    item = ItemSpec(command=None, prompt=None, cwd=CWD, env={"A": "item"})
    launch = interactive_launch("/bin/agent", ["--acp"], {"A": "conf", "B": "conf"}, item)
    assert launch.argv == ("/bin/agent", "--acp") and launch.stdin is None
    assert launch.env == {"A": "item", "B": "conf"} and launch.cwd == CWD
    for approvals in Approvals:
        assert AcpConversation.for_item(item, approvals).session_id is None


def test_the_handshake_the_session_the_mode_then_the_prompts_turn() -> None:
    replay = Replay("turns")
    assert written(replay.opening) == [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    "terminal": False,
                    "auth": {"terminal": False},
                },
            },
        }
    ]
    assert replay.conversation.turn_running  # what is sent now waits for the first turn
    session = written(replay.until(answers(0)))
    assert session == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/new",
            "params": {"cwd": CWD, "mcpServers": []},
        }
    ]
    conversation = replay.conversation
    assert conversation.agent_info is not None and conversation.agent_info["name"] == "qwen-code"
    assert conversation.load_session
    mode = written(replay.until(answers(1)))
    session_id = conversation.session_id
    assert session_id is not None
    assert mode == [
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/set_mode",
            "params": {"sessionId": session_id, "modeId": "yolo"},
        }
    ]
    assert Mode("default", "Default", "Require approval for file edits or shell commands") in (
        conversation.modes
    )
    assert conversation.asking_mode() == "default" and conversation.current_mode == "yolo"
    turn = replay.until(answers(2))
    assert written(turn) == [
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": PROMPT}]},
        }
    ]
    assert isinstance(turn[-1], TurnStarted)


def test_a_tool_turn_then_a_text_turn() -> None:
    replay = Replay("turns")
    replay.until(answers(2))
    first = replay.until(answers(3))
    events = [r for r in first if not isinstance(r, Write | UsageSoFar)]
    started, ended = of_type(events, ToolStarted), of_type(events, ToolEnded)
    assert [(s.name, s.kind, s.summary) for s in started] == [
        ("run_shell_command", ToolKind.EXECUTE, "Shell")
    ]
    assert [(e.tool_id, e.is_error) for e in ended] == [(started[0].tool_id, False)]
    assert text_of(events).startswith("MOCK-FINAL: scenario=after-tool")
    assert of_type(events, MessageText)[-1].final
    assert events[-1] == TurnEnded("end_turn") and type(events[-1]) is TurnEnded
    # qwen's drain request (between tool batches) was answered at once, -32601.
    drains = [
        json.loads(line) for line in lines_of("turns") if is_method("craft/drainMidTurnQueue")(line)
    ]
    refusals = [m for m in written(first) if "error" in m]
    assert [m["id"] for m in refusals] == [d["id"] for d in drains] and drains
    assert {m["error"]["code"] for m in refusals} == {-32601}
    usage = of_type(first, UsageSoFar)
    assert usage and usage[-1].usage.input_tokens > 0
    assert not replay.conversation.turn_running
    reactions, state = replay.conversation.send("m1", "ANSWER-NOW REPEAT:again", Delivery.QUEUE)
    assert state is DeliveryState.DELIVERED
    [prompt] = written(reactions)
    assert prompt["method"] == "session/prompt"
    assert prompt["params"]["prompt"] == [{"type": "text", "text": "ANSWER-NOW REPEAT:again"}]
    second = replay.rest()
    assert text_of(second).endswith(" again") and second[-1] == TurnEnded("end_turn")
    total = replay.conversation.usage
    assert total is not None and total.input_tokens > usage[-1].usage.input_tokens


@pytest.mark.parametrize("delivery", list(Delivery))
def test_a_message_sent_during_a_turn_is_queued_then_is_the_next_prompt(
    delivery: Delivery,
) -> None:
    replay = Replay("messages")
    replay.until(answers(2))
    reactions, state = replay.conversation.send("m1", "ANSWER-NOW REPEAT:queued", delivery)
    assert (list(reactions), state) == ([], DeliveryState.QUEUED)
    assert replay.conversation.queued() == ["m1"]
    ended = replay.until(answers(3))
    at_end = ended[ended.index(TurnEnded("end_turn")) :]
    [prompt] = written(at_end)
    assert prompt["id"] == 4
    assert prompt["params"]["prompt"] == [{"type": "text", "text": "ANSWER-NOW REPEAT:queued"}]
    assert at_end[1:] == [at_end[1], MessageDelivered("m1"), TurnStarted()]
    assert replay.conversation.queued() == [] and replay.conversation.turn_running
    answered = replay.rest()
    assert text_of(answered).endswith(" queued") and answered[-1] == TurnEnded("end_turn")


def test_an_interrupt_cancels_the_session_and_the_turn_ends_interrupted() -> None:
    replay = Replay("interrupt", prompt="SLEEP-TOOL please")
    replay.until(lambda line: b'"status":"in_progress"' in line)
    cancel = replay.conversation.interrupt()
    session_id = replay.conversation.session_id
    assert written(cancel) == [
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
    ]
    assert replay.conversation.interrupt() == []  # asked once
    ended = replay.until(answers(3))
    [tool_end] = of_type(ended, ToolEnded)
    assert tool_end.is_error  # qwen says the cancelled call failed
    assert ended[-1] == TurnEnded("interrupted") and type(ended[-1]) is TurnEnded
    replay.conversation.send("m1", "ANSWER-NOW REPEAT:after", Delivery.QUEUE)
    after = replay.rest()
    assert text_of(after).endswith(" after") and after[-1] == TurnEnded("end_turn")


def test_permissions_are_the_agents_own_options_and_answers() -> None:
    replay = Replay("approvals", prompt="write it please", mode="default")
    asked_reactions = replay.until(is_method("session/request_permission"))
    [asked] = of_type(asked_reactions, PermissionAsked)
    assert (asked.permission_id, asked.name, asked.kind) == (
        "0",
        "run_shell_command",
        ToolKind.EXECUTE,
    )
    assert asked.summary == "printf x > written.txt" and asked.tool_id is not None
    assert [(o.option_id, o.kind) for o in asked.options] == [
        ("proceed_always_project", OptionKind.ALLOW_ALWAYS),
        ("proceed_always_user", OptionKind.ALLOW_ALWAYS),
        ("proceed_once", OptionKind.ALLOW_ONCE),
        ("cancel", OptionKind.REJECT_ONCE),
    ]
    with pytest.raises(ValueError):
        replay.conversation.answer("0", "not-offered")
    assert written(replay.conversation.answer("0", "proceed_once")) == [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "result": {"outcome": {"outcome": "selected", "optionId": "proceed_once"}},
        }
    ]
    with pytest.raises(KeyError):
        replay.conversation.answer("0", "proceed_once")
    first = replay.until(answers(3))
    assert [e.is_error for e in of_type(first, ToolEnded)] == [False]
    replay.conversation.send("m1", "write again", Delivery.QUEUE)
    [again] = of_type(replay.until(is_method("session/request_permission")), PermissionAsked)
    replay.conversation.answer(again.permission_id, "cancel")
    second = replay.rest()
    assert [e.is_error for e in of_type(second, ToolEnded)] == [True]
    assert second[-1] == TurnEnded("end_turn")


def test_approvals_the_host_answers_put_the_session_in_the_mode_that_asks() -> None:
    item = ItemSpec(command=None, prompt=None, cwd=CWD, env={})
    lines = lines_of("approvals")
    for approvals in Approvals:
        conversation = AcpConversation.for_item(item, approvals)
        conversation.opening("write it please")
        conversation.on_line(lines[0])
        [request] = written(conversation.on_line(lines[1]))
        if approvals is Approvals.CLI:  # the agent's own mode: the prompt comes at once
            assert request["method"] == "session/prompt" and conversation.current_mode == "auto"
        else:
            assert request["method"] == "session/set_mode"
            assert request["params"]["modeId"] == "default"


@pytest.mark.parametrize("approvals", [Approvals.CLIENT, Approvals.POLICY])
@pytest.mark.parametrize(
    "modes",
    [None, {"currentModeId": "yolo", "availableModes": [{"id": "yolo", "name": "Yolo"}]}],
)
def test_approvals_the_host_answers_fail_an_agent_with_no_mode_that_asks(
    approvals: Approvals, modes: dict[str, Any] | None
) -> None:
    item = ItemSpec(command=None, prompt=None, cwd=CWD, env={})
    conversation = AcpConversation.for_item(item, approvals)
    conversation.opening(PROMPT)
    conversation.on_line(line({"id": 0, "result": {"protocolVersion": 1}}))
    session: dict[str, Any] = {"sessionId": SESSION}
    if modes is not None:
        session["modes"] = modes
    [failure] = conversation.on_line(line({"id": 1, "result": session}))
    # No prompt is written: nothing would ask before its tools run.
    assert isinstance(failure, ProtocolFailure)
    assert failure.reason.startswith("approvals-unsupported: the ACP agent offers no mode")
    assert ("its modes: yolo" if modes else "its modes: none") in failure.reason
    # Under `cli` the same agent runs in its own mode.
    own = AcpConversation.for_item(item, Approvals.CLI)
    own.opening(PROMPT)
    own.on_line(line({"id": 0, "result": {"protocolVersion": 1}}))
    [request] = written(own.on_line(line({"id": 1, "result": session})))
    assert request["method"] == "session/prompt"


def test_a_permission_pending_at_an_interrupt_is_cancelled_and_withdrawn() -> None:
    replay = Replay("approvals", prompt="write it please", mode="default")
    replay.until(is_method("session/request_permission"))
    reactions = replay.conversation.interrupt()
    assert written(reactions)[1] == {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {"outcome": {"outcome": "cancelled"}},
    }
    assert of_type(reactions, PermissionWithdrawn) == [
        PermissionWithdrawn("0", "the turn was cancelled")
    ]
    with pytest.raises(KeyError):
        replay.conversation.answer("0", "proceed_once")


def test_a_loaded_session_continues_without_its_history_told_again() -> None:
    session_id = json.loads(lines_of("load_first")[1])["result"]["sessionId"]
    replay = Replay("load", prompt="ANSWER-NOW REPEAT:loaded", resume=session_id)
    load = written(replay.until(answers(0)))
    assert load == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/load",
            "params": {"mcpServers": [], "cwd": CWD, "sessionId": session_id},
        }
    ]
    replayed = replay.until(answers(1))
    assert of_type(replayed, MessageText) == [] and of_type(replayed, UsageSoFar) == []
    assert replay.conversation.session_id == session_id
    turn = replay.rest()
    assert text_of(turn).endswith(" loaded") and turn[-1] == TurnEnded("end_turn")


# Hand-made lines for the edges: a conversation past its handshake.


def ready(*, load_session: bool = True, resume: str | None = None) -> AcpConversation:
    """A conversation whose agent answered `initialize` and `session/new` (SESSION)."""
    conversation = AcpConversation(cwd=CWD, resume_session=resume)
    conversation.opening(PROMPT)
    capabilities = {"loadSession": load_session}
    conversation.on_line(
        line({"id": 0, "result": {"protocolVersion": 1, "agentCapabilities": capabilities}})
    )
    if resume is None:
        conversation.on_line(line({"id": 1, "result": {"sessionId": SESSION}}))
    return conversation


def line(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


def update(session_id: str, body: dict[str, Any]) -> bytes:
    return line({"method": "session/update", "params": {"sessionId": session_id, "update": body}})


def test_an_unknown_request_of_the_agent_is_answered_method_not_found() -> None:
    conversation = ready()
    for method, request_id in (("fs/read_text_file", 7), ("terminal/create", "t"), ("x/ext", 8)):
        reactions = conversation.on_line(line({"id": request_id, "method": method, "params": {}}))
        [answer] = written(reactions)
        assert answer["id"] == request_id and answer["error"]["code"] == -32601


def test_updates_for_another_session_and_kinds_not_forwarded_are_ignored() -> None:
    conversation = ready()
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    assert conversation.on_line(update("another", chunk)) == []
    assert conversation.on_line(update(SESSION, {"sessionUpdate": "novel_kind", "x": 1})) == []
    thought = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}}
    assert conversation.on_line(update(SESSION, thought)) == []
    assert conversation.on_line(line({"method": "x/notice", "params": {}})) == []
    assert conversation.on_line(update(SESSION, chunk)) == [MessageText("hi")]


def test_the_text_said_before_a_tool_call_is_final_before_the_call() -> None:
    # Qwen tells a response's end (its usage) only after the response's tool calls: the
    # text before a call ends there, as every CLI adapter tells it.
    conversation = ready()
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    assert conversation.on_line(update(SESSION, chunk)) == [MessageText("hi")]
    call = {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "ls", "kind": "execute"}
    assert conversation.on_line(update(SESSION, call)) == [
        MessageText("", final=True),
        ToolStarted("c1", "execute", ToolKind.EXECUTE, "ls"),
    ]
    done = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}
    assert conversation.on_line(update(SESSION, done)) == [
        ToolEnded("c1", "execute", ToolKind.EXECUTE, is_error=False)
    ]


def test_each_plan_update_is_the_whole_plan_after_the_text_said_before_it() -> None:
    conversation = ready()
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    read = {"content": "read", "priority": "high", "status": "in_progress"}
    write = {"content": "write", "priority": "low", "status": "pending"}
    assert conversation.on_line(update(SESSION, chunk)) == [MessageText("hi")]
    plan = conversation.on_line(
        update(SESSION, {"sessionUpdate": "plan", "entries": [read, write]})
    )
    assert plan == [
        PlanUpdated(
            (
                PlanEntry(
                    content="read", priority=PlanPriority.HIGH, status=PlanStatus.IN_PROGRESS
                ),
                PlanEntry(content="write", priority=PlanPriority.LOW, status=PlanStatus.PENDING),
            )
        )
    ]
    emptied = conversation.on_line(update(SESSION, {"sessionUpdate": "plan", "entries": []}))
    assert emptied == [PlanUpdated(())]
    # The SDK's model leaves out an entry it cannot read (a priority ACP has not): the
    # rest of the plan stands.
    wrong = {"content": "x", "priority": "urgent", "status": "pending"}
    kept = conversation.on_line(
        update(SESSION, {"sessionUpdate": "plan", "entries": [wrong, write]})
    )
    assert kept == [PlanUpdated((plan[0].entries[1],))]


def test_an_interrupt_during_the_handshake_cancels_the_first_prompt_once_written() -> None:
    conversation = AcpConversation(cwd=CWD)
    conversation.opening(PROMPT)
    assert conversation.interrupt() == []
    conversation.on_line(line({"id": 0, "result": {"protocolVersion": 1}}))
    reactions = conversation.on_line(line({"id": 1, "result": {"sessionId": SESSION}}))
    assert [m.get("method") for m in written(reactions)] == ["session/prompt", "session/cancel"]
    assert conversation.interrupt() == []
    ended = conversation.on_line(line({"id": 2, "result": {"stopReason": "cancelled"}}))
    assert ended == [TurnEnded("interrupted")]


def test_a_stop_reason_the_sdk_does_not_know_is_the_agents_own() -> None:
    conversation = ready()
    ended = conversation.on_line(line({"id": 2, "result": {"stopReason": "paused_for_lunch"}}))
    assert ended == [TurnEnded("paused_for_lunch")]


def test_a_refused_prompt_ends_its_turn_and_the_queue_goes_on() -> None:
    conversation = ready()
    conversation.send("m1", "next", Delivery.QUEUE)
    refused = conversation.on_line(line({"id": 2, "error": {"code": -32603, "message": "boom"}}))
    assert refused[:2] == [MessageRefused(OPENING, "boom"), TurnEnded("error")]
    assert refused[-2:] == [MessageDelivered("m1"), TurnStarted()]


@pytest.mark.parametrize(
    ("broken", "reason"),
    [
        (b"not json", "not a JSON object"),
        (b"[1, 2]", "not a JSON object"),
        (update(SESSION, {"sessionUpdate": "tool_call", "toolCallId": 3}), "toolCallId"),
    ],
)
def test_a_line_that_breaks_the_protocol_fails_the_child(broken: bytes, reason: str) -> None:
    conversation = ready()
    [failure] = conversation.on_line(broken)
    assert isinstance(failure, ProtocolFailure) and reason in failure.reason
    assert conversation.on_line(update(SESSION, {"sessionUpdate": "plan", "entries": []})) == []


def test_another_protocol_version_or_a_refused_handshake_fails_the_child() -> None:
    conversation = AcpConversation(cwd=CWD)
    conversation.opening(PROMPT)
    [failure] = conversation.on_line(line({"id": 0, "result": {"protocolVersion": 2}}))
    assert isinstance(failure, ProtocolFailure) and "protocol version 2" in failure.reason
    for request_id in (0, 1):  # initialize, then session/new
        conversation = AcpConversation(cwd=CWD)
        conversation.opening(PROMPT)
        if request_id == 1:
            conversation.on_line(line({"id": 0, "result": {"protocolVersion": 1}}))
        error = {"code": -32603, "message": "no model configured"}
        [failure] = conversation.on_line(line({"id": request_id, "error": error}))
        assert isinstance(failure, ProtocolFailure) and "no model configured" in failure.reason


AUTH_REQUIRED: Final = {"code": -32000, "message": "Authentication required"}
AUTH_METHODS: Final = [
    {"id": "sign-in", "name": "Sign in", "description": "In a browser"},
    {
        "type": "env_var",
        "id": "gateway",
        "name": "A gateway",
        "vars": [{"name": "GATEWAY_KEY"}, {"name": "GATEWAY_URL"}],
    },
    {
        "type": "env_var",
        "id": "api-key",
        "name": "An API key",
        "vars": [{"name": "AGENT_KEY"}, {"name": "AGENT_BASE", "optional": True}],
    },
    {"type": "terminal", "id": "login", "name": "Log in", "args": ["--login"]},
]


def asked_to_authenticate(
    env_names: frozenset[str], methods: list[dict[str, Any]] | None = None
) -> tuple[AcpConversation, list[Reaction]]:
    """A conversation whose agent refused its `session/new` with `auth_required`, and
    what it did then."""
    item = ItemSpec(command=None, prompt=PROMPT, cwd=CWD, env={}, env_names=env_names)
    conversation = AcpConversation.for_item(item, Approvals.CLI)
    conversation.opening(PROMPT)
    answer = {"protocolVersion": 1, "authMethods": AUTH_METHODS if methods is None else methods}
    [new] = written(conversation.on_line(line({"id": 0, "result": answer})))
    assert new["method"] == "session/new"
    return conversation, list(conversation.on_line(line({"id": 1, "error": AUTH_REQUIRED})))


def auth_failure(reactions: Sequence[Reaction]) -> str:
    [failure] = reactions
    assert isinstance(failure, ProtocolFailure)
    assert failure.reason.startswith("auth-required: "), failure.reason
    return failure.reason


def test_an_agent_that_asks_is_authenticated_with_the_env_var_method_the_child_provides() -> None:
    # `gateway` lacks GATEWAY_URL; `api-key` needs AGENT_KEY only (AGENT_BASE is optional).
    conversation, reactions = asked_to_authenticate(frozenset({"GATEWAY_KEY", "AGENT_KEY"}))
    assert written(reactions) == [
        {"jsonrpc": "2.0", "id": 2, "method": "authenticate", "params": {"methodId": "api-key"}}
    ]
    [again] = written(conversation.on_line(line({"id": 2, "result": {}})))
    assert again == {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "session/new",
        "params": {"cwd": CWD, "mcpServers": []},
    }
    started = conversation.on_line(line({"id": 3, "result": {"sessionId": SESSION}}))
    [prompt] = written(started)
    assert prompt["method"] == "session/prompt" and TurnStarted() in started
    assert conversation.session_id == SESSION


def test_a_resume_that_asks_is_authenticated_then_loaded() -> None:
    item = ItemSpec(
        command=None,
        prompt=PROMPT,
        cwd=CWD,
        env={},
        resume_session=SESSION,
        env_names=frozenset({"AGENT_KEY"}),
    )
    conversation = AcpConversation.for_item(item, Approvals.CLI)
    conversation.opening(PROMPT)
    answer = {
        "protocolVersion": 1,
        "agentCapabilities": {"loadSession": True},
        "authMethods": AUTH_METHODS,
    }
    conversation.on_line(line({"id": 0, "result": answer}))
    [authenticate] = written(conversation.on_line(line({"id": 1, "error": AUTH_REQUIRED})))
    assert authenticate["params"] == {"methodId": "api-key"}
    [load] = written(conversation.on_line(line({"id": 2, "result": {}})))
    assert load["method"] == "session/load" and load["params"]["sessionId"] == SESSION
    [prompt] = written(conversation.on_line(line({"id": 3, "result": {}})))
    assert prompt["method"] == "session/prompt"


def test_an_agent_that_asks_for_what_the_child_lacks_fails_it_naming_the_methods() -> None:
    conversation, reactions = asked_to_authenticate(frozenset({"GATEWAY_KEY", "AGENT_BASE"}))
    reason = auth_failure(reactions)
    assert "refused session/new" in reason
    for said in (
        "sign-in (agent: the host has no person to sign in)",
        "gateway (env_var: GATEWAY_KEY, GATEWAY_URL)",
        "api-key (env_var: AGENT_KEY, AGENT_BASE (optional))",
        "login (terminal: the host has no terminal to run it)",
    ):
        assert said in reason, reason
    assert conversation.on_line(line({"id": 9, "result": {}})) == []  # failed: nothing more


def test_an_agent_that_offers_no_method_or_refuses_authenticate_fails_the_child() -> None:
    _, reactions = asked_to_authenticate(frozenset({"AGENT_KEY"}), methods=[])
    assert auth_failure(reactions).endswith("it offers no method")
    conversation, _ = asked_to_authenticate(frozenset({"AGENT_KEY"}))
    refused = {"code": -32603, "message": "the key is not valid"}
    reason = auth_failure(conversation.on_line(line({"id": 2, "error": refused})))
    assert "refused authenticate api-key: the key is not valid" in reason
    assert "api-key (env_var: AGENT_KEY" in reason


def test_an_agent_that_asks_again_after_authenticate_fails_the_child() -> None:
    conversation, _ = asked_to_authenticate(frozenset({"AGENT_KEY"}))
    conversation.on_line(line({"id": 2, "result": {}}))
    reason = auth_failure(conversation.on_line(line({"id": 3, "error": AUTH_REQUIRED})))
    assert "still refused session/new after authenticate api-key" in reason


def test_an_agent_that_does_not_ask_is_never_authenticated() -> None:
    # Qwen Code lists `openai` (satisfied by its launch's arguments) and never asks.
    item = ItemSpec(command=None, prompt=PROMPT, cwd=CWD, env={}, env_names=frozenset({"X"}))
    conversation = AcpConversation.for_item(item, Approvals.CLI)
    conversation.opening(PROMPT)
    answer = {"protocolVersion": 1, "authMethods": AUTH_METHODS}
    conversation.on_line(line({"id": 0, "result": answer}))
    [prompt] = written(conversation.on_line(line({"id": 1, "result": {"sessionId": SESSION}})))
    assert prompt["method"] == "session/prompt"


def test_a_resume_needs_load_session() -> None:
    conversation = AcpConversation(cwd=CWD, resume_session="old")
    conversation.opening(PROMPT)
    [failure] = conversation.on_line(line({"id": 0, "result": {"protocolVersion": 1}}))
    assert isinstance(failure, ProtocolFailure)
    assert failure.reason.startswith("resume-unsupported")


def test_a_long_line_is_no_crash() -> None:
    conversation = ready()
    chunk = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "x" * 10_000_000},
    }
    events = conversation.on_line(update(SESSION, chunk))
    assert sum(len(e.text) for e in of_type(events, MessageText)) == 10_000_000


def test_an_agent_definitions_body_leads_the_first_prompt_only() -> None:
    item = ItemSpec(command=None, prompt=PROMPT, cwd=CWD, env={}, instructions="Be brief.")
    conversation = AcpConversation.for_item(item, Approvals.CLI)
    conversation.opening(PROMPT)
    capabilities = {"loadSession": True}
    conversation.on_line(
        line({"id": 0, "result": {"protocolVersion": 1, "agentCapabilities": capabilities}})
    )
    [prompt] = written(conversation.on_line(line({"id": 1, "result": {"sessionId": SESSION}})))
    assert prompt["params"]["prompt"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": PROMPT},
    ]
    conversation.on_line(line({"id": 2, "result": {"stopReason": "end_turn"}}))
    reactions, _ = conversation.send("m1", "again", Delivery.QUEUE)
    [second] = written(reactions)
    assert second["params"]["prompt"] == [{"type": "text", "text": "again"}]
    # A loaded session has them already: a resume's first prompt is the message alone.
    resumed = AcpConversation.for_item(attrs.evolve(item, resume_session=SESSION), Approvals.CLI)
    resumed.opening("go on")
    resumed.on_line(
        line({"id": 0, "result": {"protocolVersion": 1, "agentCapabilities": capabilities}})
    )
    [prompt] = written(resumed.on_line(line({"id": 1, "result": {}})))
    assert prompt["params"]["prompt"] == [{"type": "text", "text": "go on"}]
