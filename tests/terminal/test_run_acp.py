"""`subagent-host run -i --backend qwen` through a real pseudo-terminal: Qwen Code (pinned,
scripts/install-agents) as a configured ACP backend (`--config`), against the loopback
mock LLM. An ACP agent asks before its tools run as Claude Code does, whatever its name:
the permission is shown inline and answered by a key; `show` and `logs` then tell the
run like any other. The test proves that no process survives it."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Final

from tests.backends.fixtures.record_acp import WRITE_COMMAND, WRITTEN
from tests.e2e.agents import needs_cli
from tests.e2e.test_acp_qwen import qwen_config, qwen_environment
from tests.mock_llm import FINAL_TEXT_PREFIX, MockLLM
from tests.terminal.inspecting import command
from tests.terminal.test_run import (
    Terminal,
    assert_nothing_survives,
    only_run,
    run_argv,
    terminal,
)
from tests.terminal.test_run_interactive import CTRL_D, ENTER, PROMPT

pytestmark = needs_cli("qwen")

SLOW_WAITS: Final = 4
"""A qwen turn takes seconds, and its start half a gigabyte: a wait for what its model
says is this many of the terminal's bounded waits."""


def slowly(term: Terminal, text: bytes, after: int = 0) -> int:
    """`term.wait_for`, bounded SLOW_WAITS times as long."""
    for _ in range(SLOW_WAITS - 1):
        with contextlib.suppress(AssertionError):
            return term.wait_for(text, after)
    return term.wait_for(text, after)


async def test_a_permission_an_acp_agent_asks_is_answered_inline_and_the_run_shown(
    tmp_path: Path,
) -> None:
    state_dir, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        config = qwen_config(tmp_path, mock)
        env = [f"{k}={v}" for k, v in qwen_environment(tmp_path).items()]
        args = ("-i", "--config", str(config), "--backend", "qwen", "--cwd", str(work))
        argv = ["/usr/bin/env", *env, *run_argv(state_dir, *args, "write it please")]
        with terminal(argv, None) as term:
            asked = f"? execute run_shell_command: {WRITE_COMMAND}\r\n".encode()
            at = slowly(term, asked)
            at = term.wait_for(b"[y] allow once  [a] allow always  [n] reject? ", at)
            assert not (work / WRITTEN).exists()  # it waits for the answer
            term.write(b"y" + ENTER)
            at = slowly(term, FINAL_TEXT_PREFIX.encode(), at)  # the answer once it ran
            term.wait_for(PROMPT, at)
            assert (work / WRITTEN).exists()
            term.write(CTRL_D)
            assert term.exit_status() == 0
    run = only_run(state_dir)
    assert run.status == "completed" and run.children[0].backend == "qwen"
    shown = await command("show", "--state-dir", str(state_dir), run.run_id)
    assert shown.status == 0 and "qwen" in shown.stdout and "completed" in shown.stdout
    logs = await command("logs", "--state-dir", str(state_dir), run.run_id)
    assert logs.status == 0 and "» turn end: end_turn" in logs.stdout, logs
    assert "permission" in logs.stdout, logs
    assert_nothing_survives(state_dir)
