"""The codex adapter on streams recorded from the real CLI (fixtures/record_codex.py)."""

from __future__ import annotations

import json
import random
import tomllib
from pathlib import Path

import pytest

from subagent_host.backends.base import ItemSpec
from subagent_host.backends.codex import (
    ENV_ALLOWED,
    READ_ONLY,
    TOOLS,
    WORKSPACE_NETWORK,
    WORKSPACE_WRITE,
    CodexBackend,
    CodexParser,
    toml_string,
)
from subagent_host.backends.exits import ProcessExit
from subagent_host.planning.access import negotiate
from subagent_host.planning.request import FilesystemAccess
from subagent_host.planning.views import Access

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "codex"
EXITED_0 = ProcessExit(exit_code=0, signal=None)
EXITED_1 = ProcessExit(exit_code=1, signal=None)
TERMINATED = ProcessExit(exit_code=None, signal=15)
HEAD = ("codex", "exec", "--json", "--skip-git-repo-check", "-c", 'approval_policy="never"')
NO_WEB_SEARCH = ("-c", 'web_search="disabled"')


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def thread_of(data: bytes) -> str:
    first = json.loads(data.splitlines()[0])
    assert first["type"] == "thread.started"
    return str(first["thread_id"])


def parse(data: bytes, seed: int = 3, most: int = 700) -> tuple[CodexParser, list[str]]:
    """Feed `data` in random pieces (lines split anywhere), collecting activity."""
    parser, activity, rng, start = CodexParser(), [], random.Random(seed), 0
    while start < len(data):
        end = start + rng.randint(1, most)
        parser.on_stdout(data[start:end])
        activity += parser.activity()
        start = end
    return parser, activity


@pytest.mark.parametrize("seed", range(8))
def test_a_tool_turn_then_an_answer_completes_with_text_usage_thread_and_activity(
    seed: int,
) -> None:
    data = fixture("tool_then_answer.jsonl")
    parser, activity = parse(data, seed=seed, most=[1, 7, 700][seed % 3])
    assert parser.finished
    outcome = parser.outcome(EXITED_0)
    assert outcome.completed and outcome.error_code is None
    assert outcome.final_text.startswith("MOCK-FINAL: scenario=after-tool")
    assert outcome.final_lines == 1 and outcome.final_bytes == len(outcome.final_text)
    assert outcome.backend_session_id == thread_of(data)
    assert outcome.usage is not None
    assert outcome.usage.input_tokens > 0 and outcome.usage.output_tokens > 0
    assert outcome.usage.cost_usd is None  # codex reports no cost
    # One event for the command, named only: never the command or its output.
    assert activity == ["tool shell"]
    assert not any("echo" in line or "mock-tool-ran" in line for line in activity)


def test_usage_is_the_turns_with_cached_input_apart() -> None:
    data = fixture("tool_then_answer.jsonl")
    usage = json.loads(data.splitlines()[-1])["usage"]
    outcome = parse(data)[0].outcome(EXITED_0)
    assert outcome.usage is not None
    assert outcome.usage.input_tokens == usage["input_tokens"] - usage["cached_input_tokens"]
    assert outcome.usage.output_tokens == usage["output_tokens"]
    assert outcome.usage.cache_read_tokens == usage["cached_input_tokens"]
    # input_tokens counts the cached part too: inputTokens is the rest.
    cached = (
        b'{"type":"turn.completed","usage":{"input_tokens":1000,"cached_input_tokens":900,'
        b'"cache_write_input_tokens":7,"output_tokens":50,"reasoning_output_tokens":30}}\n'
    )
    lines = fixture("answer_now.jsonl").splitlines(keepends=True)
    outcome = parse(b"".join(lines[:-1]) + cached)[0].outcome(EXITED_0)
    assert outcome.usage is not None
    assert (outcome.usage.input_tokens, outcome.usage.cache_read_tokens) == (100, 900)
    assert (outcome.usage.output_tokens, outcome.usage.cache_write_tokens) == (50, 7)


def test_a_resumed_thread_keeps_its_id_and_the_earlier_conversation() -> None:
    first = thread_of(fixture("tool_then_answer.jsonl"))
    parser, activity = parse(fixture("resume.jsonl"))
    outcome = parser.outcome(EXITED_0)
    assert outcome.completed and outcome.backend_session_id == first
    assert "items=8 tool_results=1" in outcome.final_text  # the earlier turn was sent again
    assert activity == []


def test_an_error_item_is_a_warning_not_a_failure() -> None:
    outcome = parse(fixture("error_item.jsonl"))[0].outcome(EXITED_0)
    assert outcome.completed and outcome.final_text.startswith("MOCK-FINAL: scenario=answer-now")


def test_a_failed_turn_is_an_agent_error_with_codexs_message() -> None:
    parser = parse(fixture("turn_failed.jsonl"))[0]
    assert parser.finished
    outcome = parser.outcome(EXITED_1)
    assert not outcome.completed and outcome.error_code == "agent-error"
    assert "404 Not Found" in (outcome.error_message or "")
    assert outcome.error_data is not None and outcome.error_data["exitCode"] == 1
    assert outcome.backend_session_id == thread_of(fixture("turn_failed.jsonl"))


def test_an_unreachable_model_is_not_finished_and_its_end_is_an_exit_status() -> None:
    parser, activity = parse(fixture("server_down.jsonl"))
    assert not parser.finished  # codex reconnects for ever: only a timeout ends it
    reason = "waiting for network: Connection failed: error sending request"
    assert activity == [f"reconnecting to the model ({reason})"]
    assert parser.retrying == reason  # its model never answered
    outcome = parser.outcome(TERMINATED)
    assert not outcome.completed and outcome.error_code == "exit-status"
    message = outcome.error_message or ""
    assert message.startswith("codex was killed by SIGTERM") and "Reconnecting" in message
    assert outcome.error_data is not None and outcome.error_data["signal"] == "SIGTERM"


def test_a_retry_notice_then_an_answer_completes() -> None:
    notice = b'{"type":"error","message":"Reconnecting... 1/5 (stream disconnected)"}\n'
    lines = fixture("answer_now.jsonl").splitlines(keepends=True)
    parser, activity = parse(b"".join(lines[:2]) + notice + b"".join(lines[2:]))
    assert activity == ["reconnecting to the model (1/5: stream disconnected)"]
    assert parser.retrying is None  # the model answered after all
    assert parser.outcome(EXITED_0).completed


def test_an_error_event_without_a_turn_end_is_an_agent_error() -> None:
    lines = fixture("turn_failed.jsonl").splitlines(keepends=True)
    cut = b"".join(line for line in lines if b'"turn.failed"' not in line)
    parser = parse(cut)[0]
    assert not parser.finished
    outcome = parser.outcome(EXITED_1)
    assert outcome.error_code == "agent-error" and "404" in (outcome.error_message or "")


def test_output_cut_before_the_turn_ends_is_failed() -> None:
    lines = fixture("tool_then_answer.jsonl").splitlines(keepends=True)
    cut = b"".join(line for line in lines if b'"turn.completed"' not in line)
    outcome = parse(cut)[0].outcome(EXITED_0)
    assert not outcome.completed and outcome.error_code == "exit-status"
    assert outcome.error_message == "codex exited without finishing its turn"
    assert outcome.final_text.startswith("MOCK-FINAL")  # kept, but the run is not completed


def test_a_non_zero_exit_without_events_reports_codexs_error_line_and_stderr_tail() -> None:
    # What `codex exec resume` printed for a thread it did not know (stdout empty).
    parser = CodexParser()
    parser.on_stderr(b"WARNING: proceeding, even though we could not create PATH aliases\n")
    parser.on_stderr(b"Error: thread/resume: thread/resume failed: no rollout found for thread id")
    parser.on_stderr(b" 0123 (code -32600)\n")
    outcome = parser.outcome(EXITED_1)
    assert not outcome.completed and outcome.error_code == "exit-status"
    assert outcome.error_message == (
        "codex exited with status 1: thread/resume: thread/resume failed: "
        "no rollout found for thread id 0123 (code -32600)"
    )
    assert outcome.error_data is not None
    assert "WARNING" in str(outcome.error_data["stderrTail"])
    assert outcome.usage is None and outcome.backend_session_id is None


def test_harmless_stderr_does_not_fail_a_finished_turn() -> None:
    parser = parse(fixture("answer_now.jsonl"))[0]
    parser.on_stderr(b"WARNING: proceeding, even though we could not create PATH aliases\n")
    parser.on_stderr(b"2026-01-01T00:00:00Z ERROR codex_core::tools::router: error=rejected\n")
    assert parser.outcome(EXITED_0).completed


def test_a_final_event_stands_even_if_codex_is_killed_afterwards() -> None:
    parser = parse(fixture("answer_now.jsonl"))[0]
    assert parser.finished
    outcome = parser.outcome(TERMINATED)
    assert outcome.completed and outcome.final_text.startswith("MOCK-FINAL")


def test_the_last_agent_message_is_the_answer() -> None:
    lines = fixture("answer_now.jsonl").splitlines(keepends=True)
    early = (
        b'{"type":"item.completed","item":{"id":"item_9","type":"agent_message",'
        b'"text":"looking first"}}\n'
    )
    outcome = parse(b"".join(lines[:2]) + early + b"".join(lines[2:]))[0].outcome(EXITED_0)
    assert outcome.final_text.startswith("MOCK-FINAL")


def test_other_tools_are_named_once_without_arguments() -> None:
    events = [
        {"type": "item.started", "item": {"id": "a", "type": "mcp_tool_call", "server": "docs",
                                          "tool": "search", "arguments": {"q": "SECRET"}}},
        {"type": "item.completed", "item": {"id": "a", "type": "mcp_tool_call", "server": "docs",
                                            "tool": "search", "result": "SECRET"}},
        {"type": "item.completed", "item": {"id": "b", "type": "file_change",
                                            "changes": [{"path": "/x/SECRET", "kind": "add"}]}},
        {"type": "item.started", "item": {"id": "c", "type": "web_search", "query": "SECRET"}},
        {"type": "item.updated", "item": {"id": "d", "type": "todo_list", "items": []}},
        {"type": "item.updated", "item": {"id": "d", "type": "todo_list", "items": []}},
        {"type": "item.completed", "item": {"id": "e", "type": "reasoning", "text": "SECRET"}},
        {"type": "item.completed", "item": {"type": "command_execution", "command": "SECRET"}},
    ]  # fmt: skip
    data = b"".join(json.dumps(event).encode() + b"\n" for event in events)
    activity = parse(data)[1]
    assert activity == [
        "tool mcp docs.search",
        "tool apply_patch",
        "tool web_search",
        "tool update_plan",
        "tool shell",
    ]
    assert not any("SECRET" in line for line in activity)


def test_non_json_lines_unknown_events_and_overlong_lines_are_tolerated() -> None:
    noise = b"Reading prompt from stdin...\n" + b'{"type":"brand.new","x":1}\n' + b"[1,2]\n"
    odd = b'{"type":"item.completed","item":"not an object"}\n{"type":"turn.completed"}\n'
    huge = b'{"type":"item.updated","pad":"' + b"x" * (9 * 1024 * 1024) + b'"}\n'
    data = noise + odd + huge + fixture("answer_now.jsonl")
    parser, _ = parse(data, most=1 << 20)
    outcome = parser.outcome(EXITED_0)
    assert outcome.completed and outcome.final_text.startswith("MOCK-FINAL: scenario=answer-now")


def test_a_last_line_without_newline_is_still_read() -> None:
    parser = CodexParser()
    parser.on_stdout(fixture("answer_now.jsonl").rstrip(b"\n"))
    assert parser.outcome(EXITED_0).completed


def test_an_overlong_line_is_counted_in_the_error_data() -> None:
    huge = b'{"type":"item.updated","pad":"' + b"x" * (9 * 1024 * 1024) + b'"}\n'
    outcome = parse(huge, most=1 << 20)[0].outcome(EXITED_1)
    assert outcome.error_data is not None and outcome.error_data["droppedLines"] == 1


def item(**fields: object) -> ItemSpec:
    base: dict[str, object] = {"command": None, "prompt": "do it", "cwd": "/w", "env": {"A": "1"}}
    return ItemSpec(**{**base, **fields})  # type: ignore[arg-type]


def test_prepare_maps_request_fields_to_codex_flags() -> None:
    launch = CodexBackend().prepare(item(model="gpt-5.5", thinking="high"))
    assert launch.argv == (
        *HEAD, "--sandbox", "workspace-write",
        "-c", "sandbox_workspace_write.network_access=true",
        "-m", "gpt-5.5", "-c", 'model_reasoning_effort="high"', "-",
    )  # fmt: skip
    assert launch.stdin == b"do it" and launch.env == {"A": "1"} and launch.cwd == "/w"


def test_prepare_resumes_the_thread_after_a_separator() -> None:
    launch = CodexBackend(executable="/opt/codex").prepare(
        item(resume_session="01a22ada-db40-7403-918d-6befcb227fd5")
    )
    assert launch.argv[0] == "/opt/codex"
    assert launch.argv[-4:] == ("resume", "--", "01a22ada-db40-7403-918d-6befcb227fd5", "-")


def test_without_a_prompt_stdin_is_still_closed() -> None:
    launch = CodexBackend().prepare(item(prompt=None))
    assert launch.stdin == b"" and launch.argv[-1] == "-"


SANDBOXES = {
    READ_ONLY: ("--sandbox", "read-only", *NO_WEB_SEARCH),
    WORKSPACE_WRITE: (
        "--sandbox", "workspace-write",
        "-c", "sandbox_workspace_write.network_access=false", *NO_WEB_SEARCH,
    ),
    WORKSPACE_NETWORK: (
        "--sandbox", "workspace-write", "-c", "sandbox_workspace_write.network_access=true"
    ),
}  # fmt: skip


def sandbox_of(spec: ItemSpec) -> tuple[str, ...]:
    argv = CodexBackend().prepare(spec).argv
    assert argv[: len(HEAD)] == HEAD and argv[-1] == "-"
    return argv[len(HEAD) : -1]


@pytest.mark.parametrize(
    ("access", "tier"),
    [
        (Access(), WORKSPACE_NETWORK),
        (Access(network=False), WORKSPACE_WRITE),
        (Access(filesystem=FilesystemAccess.READ), READ_ONLY),
        (Access(filesystem=FilesystemAccess.READ, network=False), READ_ONLY),
    ],
)
def test_access_chooses_the_sandbox_through_the_tools_it_leaves(access: Access, tier: str) -> None:
    kept = tuple(negotiate(CodexBackend(), None, access).kept)
    full = access == Access()
    spec = item(
        tools=None if full else kept,
        filesystem_access=access.filesystem,
        network_access=access.network,
    )
    assert sandbox_of(spec) == SANDBOXES[tier]
    # The effects the receipts show are exactly the chosen sandbox's.
    assert {effect for name in kept for effect in TOOLS[name]} == TOOLS[tier]


@pytest.mark.parametrize(
    "access", [Access(filesystem=FilesystemAccess.NONE), Access(process=False)]
)
def test_access_codex_cannot_honour_leaves_no_tool(access: Access) -> None:
    # codex always reads files and runs commands: the server refuses (no-tools-left).
    assert negotiate(CodexBackend(), None, access).kept == {}


@pytest.mark.parametrize(
    ("tools", "tier"),
    [
        ((READ_ONLY,), READ_ONLY),
        ((WORKSPACE_WRITE,), WORKSPACE_WRITE),
        ((READ_ONLY, WORKSPACE_WRITE), WORKSPACE_WRITE),
        ((WORKSPACE_NETWORK, READ_ONLY), WORKSPACE_NETWORK),
        ((), READ_ONLY),
    ],
)
def test_the_widest_tier_requested_is_the_sandbox(tools: tuple[str, ...], tier: str) -> None:
    assert sandbox_of(item(tools=tools)) == SANDBOXES[tier]


@pytest.mark.parametrize(
    ("fields", "tier"),
    [
        ({"filesystem_access": "read"}, READ_ONLY),
        ({"filesystem_access": "none"}, READ_ONLY),
        ({"network_access": False}, WORKSPACE_WRITE),
        ({"network_access": False, "tools": (READ_ONLY,)}, READ_ONLY),
    ],
)
def test_the_items_access_caps_the_sandbox(fields: dict[str, object], tier: str) -> None:
    assert sandbox_of(item(**fields)) == SANDBOXES[tier]


def test_the_backend_describes_itself() -> None:
    backend = CodexBackend(extra_env_allowed=["MY_PROVIDER_KEY"])
    assert backend.id == "codex" and backend.executable == "codex" and backend.restrictable
    assert backend.env_allowed == ENV_ALLOWED | {"MY_PROVIDER_KEY"}
    assert {"CODEX_HOME", "OPENAI_API_KEY", "OPENAI_BASE_URL"} <= CodexBackend().env_allowed
    assert "high" in backend.thinking_levels and "off" not in backend.thinking_levels
    assert isinstance(backend.parser(), CodexParser)


def developer_instructions(argv: tuple[str, ...]) -> str:
    """The one `-c developer_instructions=...` value, parsed as codex parses it (TOML)."""
    values = [
        value
        for flag, value in zip(argv, argv[1:], strict=False)
        if flag == "-c" and value.startswith("developer_instructions=")
    ]
    assert len(values) == 1, argv
    parsed = tomllib.loads("x = " + values[0].removeprefix("developer_instructions="))["x"]
    assert isinstance(parsed, str)
    return parsed


def test_instructions_are_a_developer_instructions_override_before_the_prompt() -> None:
    text = 'Be the "CODEX-4X" agent.'
    launch = CodexBackend().prepare(item(instructions=text))
    assert launch.argv == (
        *HEAD, *SANDBOXES[WORKSPACE_NETWORK],
        "-c", 'developer_instructions="Be the \\"CODEX-4X\\" agent."', "-",
    )  # fmt: skip
    assert developer_instructions(launch.argv) == text and launch.stdin == b"do it"


@pytest.mark.parametrize(
    "text",
    [
        "say \"hi\" and 'bye'",
        "C:\\tmp\\new \\n is not a newline; \\u0041 is not A",
        "line one\nline two\r\n\ttabbed\n",
        "naïve café — 日本語 Ω \u00a0 \u2028 \ufeff",
        "- be terse\n--model x",
        "\"\"\"triple\"\"\" '''quotes''' ${HOME} $(id) `id` # not a comment",
        "",
    ],
    ids=["quotes", "backslashes", "newlines", "non-ascii", "dash", "toml-and-shell", "empty"],
)
def test_instructions_parse_back_as_toml_to_the_same_string(text: str) -> None:
    launch = CodexBackend().prepare(item(instructions=text, resume_session="abc"))
    assert developer_instructions(launch.argv) == text
    assert launch.argv[-4:] == ("resume", "--", "abc", "-")


def test_instructions_beyond_the_basic_plane_parse_back_as_toml() -> None:
    text = "emoji \U0001f600 and 𝔘"
    assert developer_instructions(CodexBackend().prepare(item(instructions=text)).argv) == text


def test_without_instructions_there_is_no_developer_instructions() -> None:
    launch = CodexBackend().prepare(item(instructions=None))
    assert launch.argv == (*HEAD, *SANDBOXES[WORKSPACE_NETWORK], "-")
    assert not any("developer_instructions" in arg for arg in launch.argv)


def test_toml_string_escapes_what_toml_refuses_raw() -> None:
    assert toml_string("a\x7fb") == '"a\\u007fb"'  # DEL may not stand raw in TOML
    assert tomllib.loads("x = " + toml_string("a\x7fb\x00"))["x"] == "a\x7fb\x00"
    assert toml_string("\ud800x") == '"?x"'  # a lone surrogate cannot be sent as it is


def test_an_openai_provider_prefix_is_dropped_from_the_model() -> None:
    launch = CodexBackend().prepare(ItemSpec(command=None, prompt="p", cwd="/", env={},
                                             model="openai/gpt-5"))  # fmt: skip
    assert launch.argv[launch.argv.index("-m") + 1] == "gpt-5"
    launch = CodexBackend().prepare(ItemSpec(command=None, prompt="p", cwd="/", env={},
                                             model="local/my-model"))  # fmt: skip
    assert launch.argv[launch.argv.index("-m") + 1] == "local/my-model"


# --- turns (maxTurns): one per model response, inferred from codex's items ----------


def codex_lines(*events: dict[str, object]) -> bytes:
    return b"".join(json.dumps(event).encode() + b"\n" for event in events)


def tool(item_id: str, *, done: bool) -> dict[str, object]:
    kind = "item.completed" if done else "item.started"
    return {"type": kind, "item": {"id": item_id, "type": "command_execution"}}


def message(item_id: str, kind: str = "agent_message") -> dict[str, object]:
    return {"type": "item.completed", "item": {"id": item_id, "type": kind, "text": "t"}}


START: tuple[dict[str, object], ...] = (
    {"type": "thread.started", "thread_id": "t-1"},
    {"type": "turn.started"},
)


def test_each_response_after_the_tools_results_is_one_turn_on_the_recorded_streams() -> None:
    lines = fixture("tool_then_answer.jsonl").splitlines(keepends=True)
    kinds = [json.loads(line)["type"] for line in lines]
    assert parse(b"".join(lines[: kinds.index("item.started")]))[0].turns == 0
    assert parse(b"".join(lines[: kinds.index("item.started") + 1]))[0].turns == 1
    assert parse(b"".join(lines))[0].turns == 2  # the tool call, then the answer
    assert parse(fixture("answer_now.jsonl"))[0].turns == 1


def test_a_model_that_keeps_calling_tools_makes_one_turn_per_call() -> None:
    calls = [tool(f"item_{i}", done=done) for i in range(4) for done in (False, True)]
    assert parse(codex_lines(*START, *calls))[0].turns == 4


def test_tools_running_side_by_side_and_a_preamble_belong_to_one_response() -> None:
    data = codex_lines(
        *START,
        message("item_0"),  # "I will look around" before the calls: the same response
        tool("item_1", done=False),
        tool("item_2", done=False),
        tool("item_1", done=True),
        tool("item_2", done=True),
        message("item_3"),
    )
    assert parse(data)[0].turns == 2


def test_a_warning_item_begins_no_turn() -> None:
    data = codex_lines(
        *START,
        message("item_0", "error"),
        tool("item_1", done=False),
        tool("item_1", done=True),
        message("item_2", "error"),
    )
    assert parse(data)[0].turns == 1
