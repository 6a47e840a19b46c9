"""`subagent-host run` with its stdout on a real pseudo-terminal: the run's output shown as
it comes, above a status line kept at the bottom; `--quiet`; an agent's text and tool
calls; and a `run` in the background, which draws nothing until it is brought to the
foreground. Each test proves that no process survives it."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.e2e.agents import AGENT_BIN, pi_environment
from tests.mock_llm import DEFAULT_TOOL_COMMAND, FINAL_TEXT_PREFIX, MockLLM
from tests.terminal.test_run import (
    assert_nothing_survives,
    only_run,
    run_argv,
    terminal,
    wait_for_file,
)

pytestmark = pytest.mark.e2e

ERASE: Final = b"\r\x1b[2K"  # the status line erased: to the row's start, erase the row


def gated(started: Path, go: Path) -> list[str]:
    """A command that prints a line, says so, waits for `go`, then prints its last."""
    script = f"echo step one; touch {started}; while [ ! -e {go} ]; do sleep 0.05; done; echo done"
    return ["--", "sh", "-c", script]


def test_each_line_shows_as_it_comes_and_the_status_line_stays_last(tmp_path: Path) -> None:
    state_dir, started, go = tmp_path / "state", tmp_path / "started", tmp_path / "go"
    with terminal(run_argv(state_dir, *gated(started, go)), None) as term:
        # A line of its own, printed while the child still waits: the line erased first.
        term.wait_for(ERASE + b"step one\r\n")
        run_id = only_run(state_dir).run_id
        # The status line is drawn below it again, and stays the last row.
        term.wait_for(b"step one\r\n" + ERASE)
        after = term.seen.split(b"step one\r\n", 1)[1]
        term.wait_for(run_id[:8].encode())
        assert b"\n" not in after, after
        go.touch()
        assert term.exit_status() == 0
    # Printed once, as it came: not again at the end.
    assert term.seen.count(b"step one\r\n") == 1 and term.seen.count(b"done\r\n") == 1
    drawn = term.seen.rfind(run_id[:8].encode())  # its last drawing, then erased
    assert drawn > 0 and ERASE in term.seen[drawn:], term.seen[-300:]
    assert_nothing_survives(state_dir)


def test_quiet_prints_only_the_final_output_once_the_run_has_ended(tmp_path: Path) -> None:
    state_dir, started, go = tmp_path / "state", tmp_path / "started", tmp_path / "go"
    with terminal(run_argv(state_dir, "--quiet", *gated(started, go)), None) as term:
        wait_for_file(started)
        term.wait_for(b"step one")  # the status line's latest output line: the run has it
        assert b"step one\r\n" not in term.seen
        go.touch()
        assert term.exit_status() == 0
    # The output whole, after the status line's last drawing and its erasing.
    drawn = term.seen.rfind(only_run(state_dir).run_id[:8].encode())
    assert ERASE + b"step one\r\ndone\r\n" in term.seen[drawn:], term.seen[-300:]
    assert_nothing_survives(state_dir)


@pytest.fixture
def mock() -> Iterator[MockLLM]:
    with MockLLM() as server:
        yield server


@pytest.mark.skipif(not (AGENT_BIN / "pi").exists(), reason="pi is not installed")
def test_an_agent_shows_its_text_and_a_line_per_tool_call(tmp_path: Path, mock: MockLLM) -> None:
    state_dir = tmp_path / "state"
    args = ("--backend", "pi", "--model", "mock/mock-model", "run the shell tool")
    argv = ["/usr/bin/env", *_env(pi_environment(tmp_path, mock.openai_base_url))]
    with terminal([*argv, *run_argv(state_dir, *args)], None) as term:
        assert term.exit_status() == 0, term.seen[-2000:]
    child = only_run(state_dir).children[0]
    assert child.output.text.startswith(FINAL_TEXT_PREFIX)
    shown = term.seen.replace(b"\r\n", b"\n").decode()
    lines = [line.rsplit("\x1b[2K", 1)[-1] for line in shown.split("\n")]
    assert f"› execute: {DEFAULT_TOOL_COMMAND}" in lines, shown
    # Its text, line by line, after the tool's line; once (not printed again at the end).
    text_lines = child.output.text.rstrip("\n").split("\n")
    at = lines.index(f"› execute: {DEFAULT_TOOL_COMMAND}")
    assert lines[at + 1 : at + 1 + len(text_lines)] == text_lines, shown
    assert shown.count(text_lines[0]) == 1, shown
    assert_nothing_survives(state_dir)


def _env(env: dict[str, str]) -> list[str]:
    return [f"{name}={value}" for name, value in env.items()]


# Runs `run` (argv after the FIFO's path) in a process group of its own, in the background
# of this terminal, whose foreground stays this wrapper's group; once a line comes through
# the FIFO, it makes `run`'s group the foreground one (as a shell's `fg` does).
IN_BACKGROUND: Final = """
import os, sys
gate, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.execv(argv[0], argv)
os.setpgid(pid, pid)
with open(gate) as fifo:
    fifo.readline()
os.tcsetpgrp(0, pid)
_, status = os.waitpid(pid, 0)
os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def test_a_run_in_the_background_draws_no_status_line_until_in_the_foreground(
    tmp_path: Path,
) -> None:
    state_dir, started, go = tmp_path / "state", tmp_path / "started", tmp_path / "go"
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    wrapper = [sys.executable, "-c", IN_BACKGROUND, str(gate)]
    with terminal([*wrapper, *run_argv(state_dir, *gated(started, go))], None) as term:
        wait_for_file(started)
        # Its output lines are printed (the person asked for them with `&`) ...
        term.wait_for(b"step one\r\n")
        run_id = only_run(state_dir).run_id
        # ... but no status line: not its id, its status, its spinner, nor an erasing.
        assert run_id[:8].encode() not in term.seen and b"running" not in term.seen
        assert b"\x1b[" not in term.seen, term.seen
        with gate.open("w") as fifo:
            fifo.write("fg\n")  # the wrapper makes the run's group the foreground one
        term.wait_for(run_id[:8].encode())  # now it draws
        assert re.search(rb"\x1b\[2K.*running", term.seen)
        go.touch()
        assert term.exit_status() == 0
    assert term.seen.count(b"done\r\n") == 1
    assert_nothing_survives(state_dir)
