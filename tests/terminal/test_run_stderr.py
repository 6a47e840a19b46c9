"""`subagent-host run` shows a command's stderr as it comes (its `stderr` events): marked
`stderr│ ` among the output lines when stdout and stderr are a terminal, as the child
wrote it otherwise (stdout still gets exactly the child's stdout), and the failure report
at the end does not show it again; `--quiet` keeps it for the end; a stderr nobody reads
any more stops nothing. Each test proves that no process survives it."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Final

import pytest

from tests.e2e.harness import EXIT_TIMEOUT_S
from tests.terminal.test_run import (
    assert_nothing_survives,
    only_run,
    run_argv,
    terminal,
    wait_for_file,
)
from tests.terminal.test_run_live import ERASE

pytestmark = pytest.mark.e2e

MARK: Final = "stderr│ ".encode()


def gated(go: Path) -> list[str]:
    """A command that prints a line to stdout and one to stderr, waits for `go`, then
    prints a last one to each (that to stderr without its newline) and fails with 3.
    Words, not runs of one letter: those would be redacted."""
    wait = f"while [ ! -e {go} ]; do sleep 0.05; done"
    script = (
        f"echo out first; echo a warning from the child >&2; {wait}; "
        "echo out last; printf 'it failed, it says' >&2; exit 3"
    )
    return ["--", "sh", "-c", script]


def test_on_a_terminal_each_stderr_line_shows_marked_as_it_comes_and_once(
    tmp_path: Path,
) -> None:
    state_dir, go = tmp_path / "state", tmp_path / "go"
    with terminal(run_argv(state_dir, *gated(go)), None) as term:
        # Shown while the child still waits: marked, above the status line (erased first).
        term.wait_for(MARK + b"a warning from the child")
        styled = rb"\r\x1b\[2K(\x1b\[[0-9;]*m)*" + re.escape(MARK) + b"a warning from the child"
        assert re.search(styled, term.seen), term.seen[-300:]
        run_id = only_run(state_dir).run_id
        term.wait_for(run_id[:8].encode())  # the status line is drawn again below it
        go.touch()
        assert term.exit_status() == 3
    shown = term.seen.decode()
    # Each line once: shown as it came, not again by the failure report at the end.
    assert shown.count("a warning from the child") == 1, shown
    assert shown.count("it failed, it says") == 1, shown
    assert re.search(r"stderr│ it failed, it says", shown), shown
    assert shown.count("out first\r\n") == 1 and shown.count("out last\r\n") == 1
    assert_nothing_survives(state_dir)


def test_with_stdout_in_a_file_stderr_shows_unmarked_as_it_comes_and_stdout_is_exact(
    tmp_path: Path,
) -> None:
    state_dir, go, stdout = tmp_path / "state", tmp_path / "go", tmp_path / "stdout"
    with terminal(run_argv(state_dir, *gated(go)), stdout) as term:
        term.wait_for(b"a warning from the child\r\n")  # while the child still waits
        go.touch()
        assert term.exit_status() == 3
    shown = term.seen.decode()
    # As the child wrote it: no mark; each line once (the report at the end adds none).
    assert MARK not in term.seen and shown.count("a warning from the child") == 1, shown
    assert shown.count("it failed, it says") == 1, shown
    assert stdout.read_bytes() == b"out first\nout last\n"
    assert_nothing_survives(state_dir)


async def test_piped_stderr_gets_the_childs_stderr_as_it_comes_and_stdout_its_stdout_exactly(
    tmp_path: Path,
) -> None:
    state_dir, go = tmp_path / "state", tmp_path / "go"
    process = await asyncio.create_subprocess_exec(
        *run_argv(state_dir, *gated(go)),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(EXIT_TIMEOUT_S * 3):
            assert process.stderr is not None
            # Before the child has ended: it waits for the test.
            assert await process.stderr.readline() == b"a warning from the child\n"
            assert process.returncode is None
            go.touch()
            stdout, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()  # by pid: the one process this test started
            await process.wait()
    assert process.returncode == 3
    assert stdout == b"out first\nout last\n"
    # The rest as the child wrote it, not followed by its tail again.
    assert stderr == b"it failed, it says"
    assert_nothing_survives(state_dir)


def test_quiet_shows_a_failed_commands_stderr_once_at_the_end(tmp_path: Path) -> None:
    state_dir, go, started = tmp_path / "state", tmp_path / "go", tmp_path / "started"
    script = f"echo a warning >&2; touch {started}; while [ ! -e {go} ]; do sleep 0.05; done"
    with terminal(run_argv(state_dir, "-q", "--", "sh", "-c", script + "; exit 3"), None) as term:
        wait_for_file(started)
        term.wait_for(b"running")
        go.touch()
        assert term.exit_status() == 3
    # After the status line's last drawing and its erasing, unmarked: the tail, at the end.
    drawn = term.seen.rfind(only_run(state_dir).run_id[:8].encode())
    assert ERASE + b"a warning\r\n" in term.seen[drawn:], term.seen[-300:]
    assert term.seen.count(b"a warning") == 1 and MARK not in term.seen
    assert_nothing_survives(state_dir)


async def test_a_stderr_nobody_reads_any_more_leaves_the_run_and_its_stdout_whole(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read what it writes to stderr
    try:
        process = await asyncio.create_subprocess_exec(
            *run_argv(state_dir, "--", "sh", "-c", "echo a warning >&2; echo the output"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=write_end,
        )
    finally:
        os.close(write_end)
    async with asyncio.timeout(EXIT_TIMEOUT_S * 3):
        stdout, _ = await process.communicate()
    assert (process.returncode, stdout) == (0, b"the output\n")
    assert only_run(state_dir).status == "completed"
    assert_nothing_survives(state_dir)
