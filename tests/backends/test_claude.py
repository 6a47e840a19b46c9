"""The claude adapter on streams recorded from the real CLI
(tests/backends/fixtures/record_claude.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import attrs
import pytest

from subagent_host.backends.base import ItemSpec
from subagent_host.backends.claude import TOOLS, ClaudeBackend, ClaudeParser
from subagent_host.backends.exits import ProcessExit

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "claude"
EXITED_0 = ProcessExit(exit_code=0, signal=None)
# What the recorded runs exited with (record_claude.py prints it).
EXITED_1 = ProcessExit(exit_code=1, signal=None)
KILLED = ProcessExit(exit_code=None, signal=15)


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def events(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in fixture(name).splitlines()]


def session_of(name: str) -> str:
    first = events(name)[0]
    assert first["type"] == "system" and first["subtype"] == "init"
    return str(first["session_id"])


def parse(
    data: bytes, exit_status: ProcessExit = EXITED_0, seed: int = 3
) -> tuple[ClaudeParser, list[str]]:
    """Feed `data` in random pieces (lines split anywhere), collecting activity."""
    parser, activity, rng, start = ClaudeParser(), [], random.Random(seed), 0
    while start < len(data):
        end = start + rng.randint(1, 700)
        parser.on_stdout(data[start:end])
        activity += parser.activity()
        start = end
    return parser, activity


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_tool_turn_then_an_answer_completes_with_text_usage_session_and_activity(
    seed: int,
) -> None:
    parser, activity = parse(fixture("tool_then_answer.jsonl"), seed=seed)
    assert parser.finished
    outcome = parser.outcome(EXITED_0)
    assert outcome.completed and outcome.error_code is None and outcome.reached_limit is None
    assert outcome.final_text.startswith("MOCK-FINAL: scenario=after-tool")
    assert outcome.final_bytes == len(outcome.final_text.encode()) and outcome.final_lines == 1
    assert outcome.backend_session_id == session_of("tool_then_answer.jsonl")
    assert activity == ["tool Bash"]  # the tool's name only, never its arguments


def test_usage_and_cost_are_the_result_events() -> None:
    result = events("tool_then_answer.jsonl")[-1]
    assert result["type"] == "result"
    usage = result["usage"]
    assert isinstance(usage, dict)
    outcome = parse(fixture("tool_then_answer.jsonl"))[0].outcome(EXITED_0)
    assert outcome.usage is not None
    assert outcome.usage.input_tokens == usage["input_tokens"] > 0
    assert outcome.usage.output_tokens == usage["output_tokens"] > 0
    assert outcome.usage.cache_read_tokens == usage["cache_read_input_tokens"]
    assert outcome.usage.cache_write_tokens == usage["cache_creation_input_tokens"]
    assert outcome.usage.cost_usd is not None and outcome.usage.cost_usd > 0
    assert outcome.usage.cost_usd == result["total_cost_usd"]


def test_usage_counts_cache_tokens_and_cost() -> None:
    line = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "ok",
        "total_cost_usd": 0.25,
        "usage": {
            "input_tokens": 5,
            "output_tokens": 7,
            "cache_read_input_tokens": 11,
            "cache_creation_input_tokens": 13,
        },
    }
    parser = ClaudeParser()
    parser.on_stdout(json.dumps(line).encode() + b"\n")
    outcome = parser.outcome(EXITED_0)
    assert outcome.usage is not None
    assert (
        outcome.usage.input_tokens,
        outcome.usage.output_tokens,
        outcome.usage.cache_read_tokens,
        outcome.usage.cache_write_tokens,
        outcome.usage.cost_usd,
    ) == (5, 7, 11, 13, 0.25)


def test_activity_never_carries_tool_arguments() -> None:
    secret = "cat /etc/shadow-SECRET"
    line = {
        "type": "assistant",
        "message": {
            "id": "m1",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": secret}},
                {"type": "tool_use", "id": "t2", "name": "Read\x1b[31m", "input": {}},
                {"type": "tool_use", "id": "t3", "input": {"file_path": secret}},
            ],
        },
        "parent_tool_use_id": None,
    }
    parser = ClaudeParser()
    parser.on_stdout(json.dumps(line).encode() + b"\n")
    activity = parser.activity()
    assert activity == ["tool Bash", "tool Read[31m", "tool ?"]
    assert parser.activity() == []  # reported once
    assert not any("SECRET" in entry for entry in activity)


def test_a_resumed_session_keeps_its_id_and_completes() -> None:
    outcome = parse(fixture("resume.jsonl"))[0].outcome(EXITED_0)
    assert outcome.completed and outcome.backend_session_id == session_of("tool_then_answer.jsonl")
    # The earlier turns were sent again: prompt, tool call, its result, answer, new prompt.
    assert "items=5 tool_results=1" in outcome.final_text


def test_an_unreachable_model_is_failed_with_claudes_message() -> None:
    parser, activity = parse(fixture("server_down.jsonl"))
    assert parser.finished
    outcome = parser.outcome(EXITED_1)
    assert not outcome.completed and outcome.reached_limit is None
    assert outcome.error_code == "agent-error"
    assert "Unable to connect to API" in (outcome.error_message or "")
    assert outcome.error_data is not None and outcome.error_data["exitCode"] == 1
    assert outcome.backend_session_id == session_of("server_down.jsonl")
    assert activity == ["reconnecting to the model (1/1: unknown)"]


def test_the_clis_turn_limit_is_limit_reached() -> None:
    parser, activity = parse(fixture("max_turns.jsonl"))
    outcome = parser.outcome(EXITED_1)
    assert not outcome.completed and outcome.reached_limit == "max-turns"
    assert outcome.backend_session_id == session_of("max_turns.jsonl")
    assert outcome.usage is not None and outcome.usage.input_tokens > 0
    assert activity == ["tool Bash"]


def test_a_synthetic_max_turns_result_is_limit_reached() -> None:
    data = fixture("answer_now.jsonl").splitlines(keepends=True)[:-1]
    line = {
        "type": "result",
        "subtype": "error_max_turns",
        "is_error": True,
        "num_turns": 3,
        "session_id": "s-1",
        "total_cost_usd": 0.5,
        "usage": {"input_tokens": 9, "output_tokens": 4},
    }
    parser, _ = parse(b"".join(data) + json.dumps(line).encode() + b"\n")
    assert parser.finished
    outcome = parser.outcome(EXITED_1)
    assert not outcome.completed and outcome.reached_limit == "max-turns"
    assert outcome.backend_session_id == "s-1"
    # What it had said so far is kept as (partial) output.
    assert outcome.final_text.startswith("MOCK-FINAL: scenario=answer-now")
    assert outcome.usage is not None and outcome.usage.output_tokens == 4


@pytest.mark.parametrize(("turns", "told"), [(1, "1 turn"), (3, "3 turns"), ("many", "many turns")])
def test_the_turn_limit_message_counts_its_turns_in_agreement(turns: object, told: str) -> None:
    data = fixture("answer_now.jsonl").splitlines(keepends=True)[:-1]
    line = {"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": turns}
    parser, _ = parse(b"".join(data) + json.dumps(line).encode() + b"\n")
    outcome = parser.outcome(EXITED_1)
    assert outcome.error_message == f"claude stopped at its turn limit ({told})"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            {"subtype": "error_during_execution", "is_error": True, "errors": ["boom", "bang"]},
            "claude: boom; bang",
        ),
        ({"subtype": "error_max_budget_usd", "is_error": True}, "claude: error_max_budget_usd"),
        ({"subtype": "success", "is_error": True, "result": "API Error: 500"}, "API Error: 500"),
        ({"subtype": "something_new", "result": "?"}, "claude: ?"),
    ],
)
def test_other_error_results_are_failed(line: dict[str, object], message: str) -> None:
    parser = ClaudeParser()
    parser.on_stdout(json.dumps({"type": "result", **line}).encode() + b"\n")
    outcome = parser.outcome(EXITED_1)
    assert not outcome.completed and outcome.reached_limit is None
    assert outcome.error_code == "agent-error" and message in (outcome.error_message or "")


def test_output_cut_before_the_result_is_an_exit_status_failure_with_stderr() -> None:
    lines = fixture("tool_then_answer.jsonl").splitlines(keepends=True)
    cut = b"".join(line for line in lines if b'"type":"result"' not in line)
    parser, _ = parse(cut)
    parser.on_stderr(b"Error: something broke\n")
    assert not parser.finished
    outcome = parser.outcome(ProcessExit(exit_code=2, signal=None))
    assert not outcome.completed and outcome.error_code == "exit-status"
    assert outcome.error_message == "claude exited with status 2: something broke"
    assert outcome.error_data is not None
    assert outcome.error_data["stderrTail"] == "Error: something broke\n"
    assert outcome.usage is None  # only the result event sums it
    assert outcome.backend_session_id == session_of("tool_then_answer.jsonl")
    assert outcome.final_text.startswith("MOCK-FINAL")  # the last answer, as partial output


def test_killed_without_a_result_names_the_signal() -> None:
    lines = fixture("tool_then_answer.jsonl").splitlines(keepends=True)
    outcome = parse(b"".join(lines[:2]))[0].outcome(KILLED)
    assert not outcome.completed and outcome.error_code == "exit-status"
    assert outcome.error_message == "claude was killed by SIGTERM"
    assert outcome.error_data is not None and outcome.error_data["signal"] == "SIGTERM"


def test_exit_0_without_a_result_is_failed() -> None:
    lines = fixture("answer_now.jsonl").splitlines(keepends=True)
    outcome = parse(b"".join(lines[:-1]))[0].outcome(EXITED_0)
    assert not outcome.completed and outcome.error_code == "exit-status"


def test_a_result_stands_even_if_claude_is_killed_afterwards() -> None:
    parser = parse(fixture("answer_now.jsonl"))[0]
    assert parser.finished
    outcome = parser.outcome(KILLED)
    assert outcome.completed and outcome.final_text.startswith("MOCK-FINAL: scenario=answer-now")


def test_non_json_lines_unknown_events_and_overlong_lines_are_tolerated() -> None:
    noise = b"Debugger attached.\n" + b'{"type":"brand_new_event","x":1}\n' + b"[1,2]\n"
    noise += b'{"type":"system","subtype":"status","status":"requesting"}\n'
    noise += b'{"type":"assistant","message":"not an object"}\n{"type":"user"}\n'
    huge = b'{"type":"stream_event","pad":"' + b"x" * (9 * 1024 * 1024) + b'"}\n'
    data = noise + huge + fixture("answer_now.jsonl")
    parser, _ = parse(data)
    outcome = parser.outcome(EXITED_0)
    assert outcome.completed and outcome.final_text.startswith("MOCK-FINAL: scenario=answer-now")
    lines = fixture("answer_now.jsonl").splitlines(keepends=True)
    failed = parse(noise + huge + b"".join(lines[:-1]))[0].outcome(EXITED_1)
    assert failed.error_data is not None and failed.error_data["droppedLines"] == 1


def test_a_last_line_without_newline_is_still_read() -> None:
    data = fixture("answer_now.jsonl").rstrip(b"\n")
    parser = ClaudeParser()
    parser.on_stdout(data)
    assert not parser.finished  # the result line is not complete yet
    assert parser.outcome(EXITED_0).completed


def test_the_final_text_falls_back_to_the_last_top_level_assistant_message() -> None:
    def assistant(message_id: str, text: str, parent: str | None = None) -> bytes:
        content = [{"type": "text", "text": text}]
        message = {"id": message_id, "role": "assistant", "content": content}
        event = {"type": "assistant", "message": message, "parent_tool_use_id": parent}
        return json.dumps(event).encode() + b"\n"

    data = assistant("a", "old") + assistant("b", "new ") + assistant("b", "part")
    data += assistant("c", "from a sub-agent", parent="toolu_1")
    data += b'{"type":"result","subtype":"success","is_error":false}\n'
    parser = ClaudeParser()
    parser.on_stdout(data)
    outcome = parser.outcome(EXITED_0)
    assert outcome.completed and outcome.final_text == "new part"


def test_prepare_maps_request_fields_to_claude_flags(tmp_path: Path) -> None:
    launch = ClaudeBackend().prepare(
        ItemSpec(
            command=None,
            prompt="do it",
            cwd=str(tmp_path),
            env={"A": "1"},
            model="claude-x",
            thinking="high",
            tools=("Read", "Bash"),
            resume_session="0123abcd-0000",
        )
    )
    assert launch.argv == (
        "claude", "-p", "--output-format", "stream-json", "--verbose",
        "--permission-mode", "dontAsk", "--strict-mcp-config",
        "--model", "claude-x", "--effort", "high", "--resume", "0123abcd-0000",
        "--tools", "Read,Bash", "--allowedTools", "Read,Bash",
    )  # fmt: skip
    assert launch.stdin == b"do it" and launch.env == {"A": "1"} and launch.cwd == str(tmp_path)


def test_without_tools_the_child_gets_exactly_the_catalog() -> None:
    launch = ClaudeBackend(executable="/x/claude").prepare(
        ItemSpec(command=None, prompt=None, cwd="/", env={})
    )
    catalog = ",".join(TOOLS)
    assert launch.argv == (
        "/x/claude", "-p", "--output-format", "stream-json", "--verbose",
        "--permission-mode", "dontAsk", "--strict-mcp-config",
        "--tools", catalog, "--allowedTools", catalog,
    )  # fmt: skip
    assert launch.stdin == b""  # stdin is closed even so


def test_no_tools_at_all_is_an_empty_tools_flag() -> None:
    launch = ClaudeBackend().prepare(ItemSpec(command=None, prompt="hi", cwd="/", env={}, tools=()))
    assert launch.argv[-2:] == ("--tools", "") and "--allowedTools" not in launch.argv


def test_the_catalog_and_its_effects() -> None:
    backend = ClaudeBackend()
    assert backend.id == "claude" and backend.restrictable and backend.executable == "claude"
    assert backend.tools["Edit"] == {"filesystem-read", "filesystem-write"}
    assert backend.tools["WebSearch"] == {"network"}
    assert {"ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR", "IS_SANDBOX"} <= backend.env_allowed
    assert backend.thinking_levels == ("low", "medium", "high", "xhigh", "max")
    assert backend.default_tools == tuple(TOOLS)  # what a child without `tools` is given


def test_instructions_are_one_append_system_prompt_argument() -> None:
    text = 'Be the "CLAUDE-4X" agent.\nUse C:\\tmp; naïve café — 日本.'
    launch = ClaudeBackend().prepare(
        ItemSpec(command=None, prompt="do it", cwd="/", env={}, tools=("Read",), instructions=text)
    )
    assert launch.argv == (
        "claude", "-p", "--output-format", "stream-json", "--verbose",
        "--permission-mode", "dontAsk", "--strict-mcp-config",
        "--tools", "Read", "--allowedTools", "Read",
        f"--append-system-prompt={text}",
    )  # fmt: skip
    assert launch.stdin == b"do it"


@pytest.mark.parametrize("text", ["-", "--tools Bash", "- be terse\n--model x", "-p", "=x"])
def test_instructions_starting_with_a_dash_stay_inside_the_one_argument(text: str) -> None:
    plain = ItemSpec(command=None, prompt=None, cwd="/", env={}, tools=())
    without = ClaudeBackend().prepare(plain).argv
    launch = ClaudeBackend().prepare(attrs.evolve(plain, instructions=text))
    # Exactly one argument more, the text inside it: never a separate argument.
    assert launch.argv == (*without, "--append-system-prompt=" + text)
    assert without[-2:] == ("--tools", "")


def test_without_instructions_there_is_no_append_system_prompt() -> None:
    launch = ClaudeBackend().prepare(
        ItemSpec(command=None, prompt="do it", cwd="/", env={}, tools=("Read",))
    )
    assert launch.argv[-4:] == ("--tools", "Read", "--allowedTools", "Read")
    assert not any("append-system-prompt" in arg for arg in launch.argv)


def test_an_anthropic_provider_prefix_is_dropped_from_the_model() -> None:
    launch = ClaudeBackend().prepare(ItemSpec(command=None, prompt="p", cwd="/", env={},
                                              model="anthropic/claude-sonnet-4-5"))  # fmt: skip
    assert launch.argv[launch.argv.index("--model") + 1] == "claude-sonnet-4-5"
    launch = ClaudeBackend().prepare(ItemSpec(command=None, prompt="p", cwd="/", env={},
                                              model="claude-sonnet-4-5"))  # fmt: skip
    assert launch.argv[launch.argv.index("--model") + 1] == "claude-sonnet-4-5"


def test_lone_surrogate_escapes_in_events_become_replacement_characters() -> None:
    # The recorded streams, with "\ud800"-style escapes where a CLI could put them.
    answer = (
        fixture("tool_then_answer.jsonl")
        .replace(b"d2875a65-", b"d2875a65\\ud800-")
        .replace(b'"name":"Bash"', b'"name":"Ba\\uDBFFsh"')
        .replace(b"MOCK-FINAL:", b"MOCK\\udfff-FINAL \\ud83d\\ude00:")
    )
    parser, activity = parse(answer)
    outcome = parser.outcome(EXITED_0)
    assert outcome.completed
    assert outcome.final_text.startswith("MOCK\ufffd-FINAL \U0001f600: scenario=after-tool")
    assert outcome.backend_session_id == "d2875a65\ufffd-e641-4630-ad60-fe17135ce083"
    assert activity == ["tool Ba\ufffdsh"]
    failed = parse(fixture("server_down.jsonl").replace(b"API Error:", b"API \\udc80Error:"))[0]
    message = failed.outcome(EXITED_1).error_message or ""
    assert "API \ufffdError: Unable to connect" in message
    for text in (outcome.final_text, outcome.backend_session_id, message, *activity):
        text.encode("utf-8")  # storable: no lone surrogate is left


# --- turns (maxTurns): claude is told, and the server counts each response ----------


def turns_of(lines: list[dict[str, object]]) -> int:
    return parse(b"".join(json.dumps(line).encode() + b"\n" for line in lines))[0].turns


def test_max_turns_is_passed_as_the_clis_own_flag() -> None:
    argv = (
        ClaudeBackend()
        .prepare(ItemSpec(command=None, prompt="hi", cwd="/", env={}, max_turns=3))
        .argv
    )
    assert argv[argv.index("--max-turns") + 1] == "3"
    plain = ClaudeBackend().prepare(ItemSpec(command=None, prompt="hi", cwd="/", env={})).argv
    assert "--max-turns" not in plain


def test_each_new_assistant_message_begins_one_turn_on_the_recorded_streams() -> None:
    recorded = events("tool_then_answer.jsonl")
    second = [i for i, e in enumerate(recorded) if e["type"] == "assistant"][1]
    assert turns_of(recorded[:second]) == 1
    assert turns_of(recorded) == 2
    assert turns_of(events("answer_now.jsonl")) == 1
    # --max-turns 1: one response, then claude itself stopped before the next request.
    assert turns_of(events("max_turns.jsonl")) == 1


def test_one_response_in_several_events_and_a_subagents_messages_count_once() -> None:
    recorded = events("tool_then_answer.jsonl")
    first = next(e for e in recorded if e["type"] == "assistant")
    message = first["message"]
    assert isinstance(message, dict)
    subagent = {
        **first,
        "parent_tool_use_id": "toolu_x",
        "message": {**message, "id": "msg_of_a_subagent"},
    }
    assert turns_of([recorded[0], first, first, subagent]) == 1
