"""`subagent-host run -i` through a real pseudo-terminal: messages typed at its `> `
prompt answered turn by turn, Ctrl-D closing the run, Ctrl-C interrupting a turn and a
second one stopping the run, stdin piped in, and a permission Claude Code asks answered
inline (the real CLI against the loopback mock LLM). Each test proves that no process
survives it."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Final

import pytest

from subagent_host.store.browse import StateBrowser
from subagent_host.values.choices import Phase
from subagent_host.values.events import TurnEvent
from tests.backends.fixtures.record_claude_stream import WRITE_COMMAND, WRITTEN
from tests.e2e.agents import AGENT_BIN, claude_environment, pi_environment
from tests.e2e.harness import EXIT_TIMEOUT_S
from tests.mock_llm import FINAL_TEXT_PREFIX, MockLLM
from tests.runs.test_live_children import LINES
from tests.terminal.test_run import (
    GREETER,
    assert_nothing_survives,
    only_run,
    run,
    run_argv,
    terminal,
)

pytestmark = pytest.mark.e2e

CHILD: Final = ("--", sys.executable, "-u", "-c", LINES)
"""Answers each line with `got <line>` but `quiet` ones, and lives through SIGINT."""
ENTER: Final = b"\r"  # what the Enter key sends; the terminal makes it a newline
CTRL_C: Final = b"\x03"
CTRL_D: Final = b"\x04"
PROMPT: Final = b"> "


def turns(state_dir: Path) -> list[tuple[Phase, str | None]]:
    with StateBrowser.open(state_dir) as browser:
        events = browser.events_after(only_run(state_dir).run_id, 0)
    return [
        (event.payload.phase, event.payload.stop_reason)
        for event in events
        if isinstance(event.payload, TurnEvent)
    ]


def test_each_message_typed_is_answered_and_ctrl_d_closes_the_run(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    with terminal(run_argv(state_dir, "-i", "hello", *CHILD), None) as term:
        at = term.wait_for(b"got hello\r\n")
        at = term.wait_for(PROMPT, at)
        term.write(b"again" + ENTER)
        at = term.wait_for(b"got again\r\n", at)
        at = term.wait_for(PROMPT, at)
        term.write(CTRL_D)
        assert term.exit_status() == 0
    run = only_run(state_dir)
    assert run.status == "completed"
    assert run.children[0].output.text == "got hello\ngot again\n"
    assert turns(state_dir) == [(Phase.START, None), (Phase.END, "end_turn")] * 2
    assert term.seen.count(b"got again\r\n") == 1  # shown as it came, not again at the end
    assert_nothing_survives(state_dir)


def test_an_empty_line_closes_a_command_that_was_given_no_prompt(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    with terminal(run_argv(state_dir, "-i", *CHILD), None) as term:
        at = term.wait_for(PROMPT)  # it waits from the start
        term.write(b"first" + ENTER)
        at = term.wait_for(b"got first\r\n", at)
        term.wait_for(PROMPT, at)
        term.write(ENTER)
        assert term.exit_status() == 0
    assert only_run(state_dir).children[0].output.text == "got first\n"
    assert_nothing_survives(state_dir)


def test_ctrl_c_interrupts_the_turn_and_one_at_the_prompt_stops_the_run(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    with terminal(run_argv(state_dir, "-i", "hello", *CHILD), None) as term:
        at = term.wait_for(PROMPT, term.wait_for(b"got hello\r\n"))
        term.write(b"quiet" + ENTER)  # a turn that goes on without a word
        at = term.wait_for(b"running", at)  # the live line is back: the turn runs
        term.write(CTRL_C)
        at = term.wait_for(b"interrupting the turn", at)
        at = term.wait_for(PROMPT, at)  # the turn ended; the child lives on
        term.write(b"still here" + ENTER)
        at = term.wait_for(b"got still here\r\n", at)
        term.wait_for(PROMPT, at)
        term.write(CTRL_C)  # no turn runs: the run is stopped
        assert term.exit_status() == 130
    stopped = only_run(state_dir)
    assert stopped.status == "cancelled" and stopped.reason == "subagent-host run got SIGINT"
    assert stopped.children[0].output.text == "got hello\ngot still here\n"
    assert turns(state_dir)[2:4] == [(Phase.START, None), (Phase.END, "interrupted")]
    assert_nothing_survives(state_dir)


def test_a_second_ctrl_c_during_a_turn_stops_the_run(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    with terminal(run_argv(state_dir, "-i", "hello", *CHILD), None) as term:
        at = term.wait_for(PROMPT, term.wait_for(b"got hello\r\n"))
        term.write(b"quiet" + ENTER)
        at = term.wait_for(b"running", at)
        term.write(CTRL_C)
        term.wait_for(b"interrupting the turn", at)
        term.write(CTRL_C)
        assert term.exit_status() == 130
    assert only_run(state_dir).status == "cancelled"
    assert_nothing_survives(state_dir)


async def piped(state_dir: Path, stdin: bytes) -> tuple[int, bytes, bytes]:
    """`run -i hello` of the line-answering child, `stdin` piped in; its exit status,
    stdout and stderr, once nothing of it survives."""
    process = await asyncio.create_subprocess_exec(
        *run_argv(state_dir, "-i", "hello", *CHILD),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(EXIT_TIMEOUT_S * 3):
            stdout, stderr = await process.communicate(stdin)
    finally:
        if process.returncode is None:
            process.kill()  # by pid: the one process this test started
            await process.wait()
    assert only_run(state_dir).status == "completed"
    assert_nothing_survives(state_dir)
    assert process.returncode is not None
    return process.returncode, stdout, stderr


async def test_lines_piped_in_are_the_messages_and_their_end_closes_the_run(
    tmp_path: Path,
) -> None:
    status, stdout, stderr = await piped(tmp_path / "state", b"again\nmore")
    assert (status, stderr) == (0, b"")  # no prompt: stdin is no terminal
    # Each line once the turn before it had ended (the last one too, without its
    # newline); each answer as it came.
    assert stdout == b"got hello\ngot again\ngot more\n"


async def test_a_message_too_long_is_said_and_the_conversation_goes_on(tmp_path: Path) -> None:
    status, stdout, stderr = await piped(tmp_path / "state", b"x" * 70_000 + b"\nagain\n")
    assert (status, stdout) == (0, b"got hello\ngot again\n")
    said = "subagent-host run: invalid params: text: is 70000 bytes of UTF-8: at most 65536\n"
    assert stderr.decode() == said


@pytest.mark.skipif(not (AGENT_BIN / "pi").exists(), reason="pi is not installed")
async def test_an_agent_named_by_its_definition_answers_then_the_end_of_stdin_closes_it(
    tmp_path: Path,
) -> None:
    """`--agent` alone: its backend (pi, the default) is read from a preflight's plan, so
    it is spawned without approvals; stdin is empty, so its first turn is its only one."""
    agents = tmp_path / "xdg-config" / "subagent-host" / "agents"
    agents.mkdir(parents=True)
    (agents / "greeter.md").write_text(GREETER)
    with MockLLM() as mock:
        env = {
            **pi_environment(tmp_path, mock.openai_base_url),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        }
        ended = await run(tmp_path / "state", "-i", "--agent", "greeter", env=env, cwd=tmp_path)
    assert ended.status == 0, ended.stderr.decode()
    run_ = only_run(tmp_path / "state")
    assert run_.status == "completed" and run_.children[0].backend == "pi"
    # As it came, once, its last line ended.
    assert ended.stdout.decode() == run_.children[0].output.text.rstrip("\n") + "\n"
    assert ended.stdout.startswith(FINAL_TEXT_PREFIX.encode())


@pytest.mark.skipif(not (AGENT_BIN / "claude").exists(), reason="claude is not installed")
def test_a_permission_claude_asks_is_shown_inline_and_answered_by_a_key(tmp_path: Path) -> None:
    state_dir, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        env = [f"{k}={v}" for k, v in claude_environment(tmp_path, mock.base_url).items()]
        args = ("-i", "--backend", "claude", "--model", "mock-model", "--cwd", str(work))
        argv = ["/usr/bin/env", *env, *run_argv(state_dir, *args, "write it please")]
        with terminal(argv, None) as term:
            at = term.wait_for(f"? execute Bash: {WRITE_COMMAND}\r\n".encode())
            at = term.wait_for(b"[y] allow once  [a] allow always  [n] reject? ", at)
            assert not (work / WRITTEN).exists()
            term.write(b"y" + ENTER)
            at = term.wait_for(b"MOCK-FINAL", at)  # the model's answer once the tool ran
            term.wait_for(PROMPT, at)
            assert (work / WRITTEN).exists()
            term.write(CTRL_D)
            assert term.exit_status() == 0
    run = only_run(state_dir)
    assert run.status == "completed" and run.children[0].backend == "claude"
    assert os.path.exists(work / WRITTEN)
    assert_nothing_survives(state_dir)
