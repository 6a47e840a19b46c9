"""The pi adapter on streams recorded from the real CLI (tests/backends/fixtures/record_pi.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import attrs
import pytest

from subagent_host.backends.base import ItemSpec
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.pi import PiBackend, PiParser

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pi"
EXITED_0 = ProcessExit(exit_code=0, signal=None)


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def parse(
    data: bytes, exit_status: ProcessExit = EXITED_0, seed: int = 3
) -> tuple[PiParser, list[str]]:
    """Feed `data` in random pieces (lines split anywhere), collecting activity."""
    parser, activity, rng, start = PiParser(), [], random.Random(seed), 0
    while start < len(data):
        end = start + rng.randint(1, 700)
        parser.on_stdout(data[start:end])
        activity += parser.activity()
        start = end
    return parser, activity


def test_a_tool_turn_then_an_answer_completes_with_text_usage_session_and_activity() -> None:
    data = fixture("tool_then_answer.jsonl")
    parser, activity = parse(data)
    outcome = parser.outcome(EXITED_0)
    session = json.loads(data.splitlines()[0])["id"]
    assert outcome.completed and outcome.error_code is None
    assert outcome.final_text.startswith("MOCK-FINAL: scenario=after-tool")
    assert outcome.backend_session_id == session
    assert outcome.usage is not None
    assert outcome.usage.input_tokens > 0 and outcome.usage.output_tokens > 0
    assert outcome.usage.cost_usd is not None and outcome.usage.cost_usd > 0
    assert activity == ["tool bash"]  # the tool's name only, never its arguments


def test_usage_is_summed_over_every_assistant_message() -> None:
    data = fixture("tool_then_answer.jsonl")
    totals = [0, 0]
    for line in data.splitlines():
        event = json.loads(line)
        message = event.get("message", {})
        if event["type"] == "message_end" and message.get("role") == "assistant":
            totals[0] += message["usage"]["input"]
            totals[1] += message["usage"]["output"]
    outcome = parse(data)[0].outcome(EXITED_0)
    assert outcome.usage is not None and totals[0] > 0
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == tuple(totals)


def test_a_resumed_session_keeps_its_id_and_completes() -> None:
    first = json.loads(fixture("tool_then_answer.jsonl").splitlines()[0])["id"]
    outcome = parse(fixture("resume.jsonl"))[0].outcome(EXITED_0)
    assert outcome.completed and outcome.backend_session_id == first
    assert "items=6" in outcome.final_text  # the earlier turns were sent again


def test_an_unreachable_model_is_failed_although_pi_exits_0() -> None:
    outcome = parse(fixture("server_down.jsonl"))[0].outcome(EXITED_0)
    assert not outcome.completed
    assert outcome.error_code == "agent-error" and "Connection error" in (
        outcome.error_message or ""
    )


def test_output_cut_before_the_final_event_is_failed() -> None:
    lines = fixture("tool_then_answer.jsonl").splitlines(keepends=True)
    cut = b"".join(line for line in lines if b'"agent_end"' not in line)
    outcome = parse(cut)[0].outcome(EXITED_0)
    assert not outcome.completed and outcome.error_code == "exit-status"


def test_an_unknown_provider_says_why_in_the_message_not_only_in_the_stderr_tail() -> None:
    # pi prints nothing on stdout and this on stderr, then exits 1 (pi 0.x, offline).
    parser = PiParser()
    parser.on_stderr(b'Error: Unknown provider "local". Use --list-models to see ')
    parser.on_stderr(b"available providers/models.\n")
    outcome = parser.outcome(ProcessExit(exit_code=1, signal=None))
    assert outcome.error_code == "exit-status"
    assert outcome.error_message == (
        'pi exited with status 1: Unknown provider "local". '
        "Use --list-models to see available providers/models."
    )
    assert outcome.error_data is not None and "Unknown provider" in str(
        outcome.error_data["stderrTail"]
    )


def test_a_final_event_stands_even_if_pi_is_killed_afterwards() -> None:
    parser = parse(fixture("answer_now.jsonl"))[0]
    assert parser.finished
    outcome = parser.outcome(ProcessExit(exit_code=None, signal=15))
    assert outcome.completed and outcome.final_text.startswith("MOCK-FINAL")


def test_non_json_lines_unknown_events_and_overlong_lines_are_tolerated() -> None:
    noise = b"Debugger attached.\n" + b'{"type":"brand_new_event","x":1}\n' + b"[1,2]\n"
    huge = b'{"type":"message_update","pad":"' + b"x" * (9 * 1024 * 1024) + b'"}\n'
    data = noise + huge + fixture("answer_now.jsonl")
    parser, _ = parse(data)
    outcome = parser.outcome(EXITED_0)
    assert outcome.completed and outcome.final_text.startswith("MOCK-FINAL: scenario=answer-now")


def test_a_last_line_without_newline_is_still_read() -> None:
    data = fixture("answer_now.jsonl").rstrip(b"\n")
    parser = PiParser()
    parser.on_stdout(data)
    assert parser.outcome(EXITED_0).completed


def test_prepare_maps_request_fields_to_pi_flags(tmp_path: Path) -> None:
    backend = PiBackend(session_dir=tmp_path, executable="pi")
    launch = backend.prepare(
        ItemSpec(
            command=None,
            prompt="do it",
            cwd=str(tmp_path),
            env={"A": "1"},
            model="anthropic/claude-x",
            thinking="high",
            tools=("read", "bash"),
            resume_session="0123abcd",
        )
    )
    assert launch.argv == (
        "pi", "--mode", "json", "--session-dir", str(tmp_path), "--session", "0123abcd",
        "--provider", "anthropic", "--model", "claude-x", "--thinking", "high",
        "--tools", "read,bash",
    )  # fmt: skip
    assert launch.stdin == b"do it" and launch.env == {"A": "1"}


@pytest.mark.parametrize(("model", "flags"), [("bare-id", ("--model", "bare-id")), (None, ())])
def test_a_model_without_provider_is_passed_alone(
    tmp_path: Path, model: str | None, flags: tuple[str, ...]
) -> None:
    backend = PiBackend(session_dir=tmp_path)
    launch = backend.prepare(ItemSpec(command=None, prompt=None, cwd="/", env={}, model=model))
    assert launch.argv[5:] == flags and launch.stdin == b""  # stdin is closed even so


def test_instructions_are_the_argument_after_append_system_prompt(tmp_path: Path) -> None:
    text = 'Be the "PI-4X" agent.\nUse C:\\tmp; naïve café — 日本.'
    launch = PiBackend(session_dir=tmp_path).prepare(
        ItemSpec(command=None, prompt="do it", cwd="/", env={}, instructions=text)
    )
    assert launch.argv == (
        "pi", "--mode", "json", "--session-dir", str(tmp_path),
        "--append-system-prompt", text + "\n",
    )  # fmt: skip
    assert launch.stdin == b"do it"


@pytest.mark.parametrize("text", ["-", "--tools read", "- be terse\n--model x", "-p"])
def test_instructions_starting_with_a_dash_stay_the_flags_value(tmp_path: Path, text: str) -> None:
    plain = ItemSpec(command=None, prompt=None, cwd="/", env={}, tools=("read",))
    without = PiBackend(session_dir=tmp_path).prepare(plain).argv
    launch = PiBackend(session_dir=tmp_path).prepare(attrs.evolve(plain, instructions=text))
    # Exactly two arguments more: the flag, then the whole text as its value.
    assert launch.argv == (*without, "--append-system-prompt", text + "\n")
    assert without[-2:] == ("--tools", "read")


def test_instructions_naming_a_file_are_never_taken_for_its_path(tmp_path: Path) -> None:
    """pi replaces a value that names an existing file by the file's contents."""
    existing = tmp_path / "notes.md"
    existing.write_text("not the instructions")
    plain = ItemSpec(command=None, prompt=None, cwd="/", env={}, instructions=str(existing))
    value = PiBackend(session_dir=tmp_path).prepare(plain).argv[-1]
    assert value == f"{existing}\n" and not Path(value).exists()


def test_without_instructions_there_is_no_append_system_prompt(tmp_path: Path) -> None:
    launch = PiBackend(session_dir=tmp_path).prepare(
        ItemSpec(command=None, prompt="do it", cwd="/", env={}, instructions=None)
    )
    assert launch.argv == ("pi", "--mode", "json", "--session-dir", str(tmp_path))
    assert not any("append-system-prompt" in arg for arg in launch.argv)


# --- turns (maxTurns): a turn is one model response, begun at pi's `turn_start` -----


def lines_of(name: str) -> list[bytes]:
    return fixture(name).splitlines(keepends=True)


def turns_after(lines: list[bytes]) -> int:
    return parse(b"".join(lines))[0].turns


def test_each_turn_start_begins_one_turn_on_the_recorded_streams() -> None:
    lines = lines_of("tool_then_answer.jsonl")
    starts = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "turn_start"]
    assert len(starts) == 2
    assert turns_after(lines[: starts[0]]) == 0
    assert turns_after(lines[: starts[0] + 1]) == 1
    assert turns_after(lines[: starts[1]]) == 1  # the tool ran inside turn 1
    assert turns_after(lines[: starts[1] + 1]) == 2
    assert turns_after(lines) == 2
    assert turns_after(lines_of("answer_now.jsonl")) == 1


def test_a_model_that_keeps_calling_tools_makes_one_turn_per_response() -> None:
    lines = lines_of("tool_then_answer.jsonl")
    kinds = [json.loads(line)["type"] for line in lines]
    tool_turn = lines[kinds.index("turn_start") : kinds.index("turn_end") + 1]
    assert turns_after(lines[:3] + tool_turn * 4) == 4


def test_a_request_pi_retries_after_an_error_is_the_same_turn() -> None:
    lines = lines_of("server_down.jsonl")
    assert json.loads(lines[-1])["type"] == "agent_end"
    retry = [
        json.dumps(event).encode() + b"\n"
        for event in (
            {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3},
            {"type": "agent_start"},
            {"type": "turn_start"},
        )
    ]
    assert turns_after(lines) == 1
    assert turns_after(lines + retry) == 1
