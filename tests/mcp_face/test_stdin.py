"""The face's reading of the client's lines: a call whose arguments hold a lone surrogate
is handed to the SDK with its arguments kept aside, every other line unchanged."""

from __future__ import annotations

import json

import mcp_types as types

from subagent_host.mcp_face.stdin import HELD_KEY, MAX_HELD, HeldArguments

CALL = (
    '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"spawn",'
    '"arguments":{"command":["echo","\\ud800"]},"_meta":{"progressToken":"p"}}}'
)


def test_a_readable_line_is_unchanged() -> None:
    held = HeldArguments()
    for line in (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status","arguments":{}}}',
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"spawn",'
        '"arguments":{"command":["echo","\\ud83d\\ude00"]}}}',  # a pair: one character
        "not json \\ud800",
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"\\ud800"}}',
    ):
        assert held.readable(line) is line


def test_a_call_with_a_lone_surrogate_reaches_its_handler_with_its_own_arguments() -> None:
    held = HeldArguments()
    line = held.readable(CALL)
    request = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    message = json.loads(line)
    assert message["id"] == 5 and message["params"]["arguments"] == {}
    assert message["params"]["_meta"]["progressToken"] == "p"
    meta = message["params"]["_meta"]
    assert held.take_arguments(meta, {}) == {"command": ["echo", "\ud800"]}
    assert held.take_arguments(meta, {"given": 1}) == {"given": 1}  # taken once only
    assert request is not None


def test_a_call_with_a_lone_surrogate_outside_its_arguments_is_left_to_the_sdk() -> None:
    held = HeldArguments()
    line = (
        '{"jsonrpc":"2.0","id":"\\ud800","method":"tools/call","params":{"name":"spawn",'
        '"arguments":{"command":["\\ud800"]}}}'
    )
    assert held.readable(line) is line


def test_calls_never_taken_are_forgotten_past_a_bound() -> None:
    held = HeldArguments()
    metas = [json.loads(held.readable(CALL))["params"]["_meta"] for _ in range(MAX_HELD + 5)]
    assert held.take_arguments(metas[0], {"gone": True}) == {"gone": True}
    assert held.take_arguments(metas[-1], {}) == {"command": ["echo", "\ud800"]}
    assert all(HELD_KEY in meta for meta in metas)
