"""An agent CLI that keeps retrying a model that does not answer, as a real process
printing its CLI's recorded retry notices far more often than the stall timeout: the
notices are not progress, so the stall timeout ends it, and it fails with
`agent-error` and the CLI's own reason, where it used to run until its timeout."""

from __future__ import annotations

import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from subagent_host.backends.base import Backend
from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.codex import CodexBackend
from subagent_host.backends.pi import PiBackend
from subagent_host.planning.plan import ChildPlan
from subagent_host.runs.state import RunStatus
from subagent_host.values.events import ActivityEvent
from tests.backends.conftest import processes_with_marker
from tests.runs.test_orchestrator import FAKES, Harness, assert_terminal_table

RECORDED: Final = Path(__file__).resolve().parents[1] / "backends" / "fixtures"
STALL_MS: Final = 1000
TIMEOUT_MS: Final = 20_000  # what ended such a child before: far beyond the stall
# Each CLI: its backend, its recorded opening lines and retry notice, the reason it tells.
CLIS: Final[dict[str, tuple[Callable[[str], Backend], str, str]]] = {
    "pi": (
        lambda executable: PiBackend(Path("/nonexistent"), executable),
        "pi/server_down_retries.jsonl",
        "1/3: Connection error.",
    ),
    "claude": (
        lambda executable: ClaudeBackend(executable),
        "claude/server_down_retries.jsonl",
        "1/3: unknown",
    ),
    "codex": (
        lambda executable: CodexBackend(executable),
        "codex/server_down.jsonl",
        "waiting for network: Connection failed: error sending request",
    ),
}


def fake_cli(tmp_path: Path, cli: str, notice: str | None = None) -> tuple[Backend, dict[str, str]]:
    """The CLI's backend running tests/fakes/retrying_agent.py, and the env telling it what
    to print: the recorded lines before the first notice, then that notice (or `notice`)
    for ever."""
    make, name, _ = CLIS[cli]
    lines = (RECORDED / name).read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if "retry" in line or "Reconnecting" in line)
    stream = tmp_path / "stream"
    stream.write_text("\n".join(lines[:first]) + "\n\n" + (notice or lines[first]))
    program = tmp_path / cli
    program.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKES / 'retrying_agent.py'}\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return make(str(program)), {"FAKE_AGENT_STREAM": str(stream)}


@pytest.mark.parametrize("cli", sorted(CLIS))
async def test_a_cli_retrying_for_its_stall_timeout_fails_with_its_reason(
    tmp_path: Path, cli: str
) -> None:
    backend, env = fake_cli(tmp_path, cli)
    harness = Harness(more={cli: backend})
    plan = ChildPlan(backend=cli, cwd=str(tmp_path), timeout_ms=TIMEOUT_MS,
                     stall_timeout_ms=STALL_MS, prompt="hello", env=env)  # fmt: skip
    run = await harness.finish(harness.launch(plan, stream=True))
    child = run.children[0]
    assert child.status is RunStatus.FAILED, (child.status, child.reason)
    assert child.error is not None and child.error.code == "agent-error"
    reason = CLIS[cli][2]
    assert child.error.message == (
        f"{cli} could not reach its model: {reason} "
        f"(still retrying after {STALL_MS} ms without an answer)"
    )
    assert run.status is RunStatus.FAILED and run.error == child.error
    # The notice came dozens of times: the activity told it once.
    activity = [
        e.payload.text for e in harness.events_of(run) if isinstance(e.payload, ActivityEvent)
    ]
    assert activity.count(f"reconnecting to the model ({reason})") == 1
    await harness.orchestrator.shutdown("test over")
    assert_terminal_table(run)
    left = [p.pid for p in processes_with_marker(run.run_id) if p.status() != "zombie"]
    assert left == []


async def test_codex_still_reconnecting_after_its_last_counted_retry_fails_at_once(
    tmp_path: Path,
) -> None:
    notice = '{"type":"error","message":"Reconnecting... 5/5 (failed to lookup address)"}'
    backend, env = fake_cli(tmp_path, "codex", notice)
    harness = Harness(more={"codex": backend})
    plan = ChildPlan(backend="codex", cwd=str(tmp_path), timeout_ms=TIMEOUT_MS,
                     stall_timeout_ms=TIMEOUT_MS, prompt="hello", env=env)  # fmt: skip
    run = await harness.finish(harness.launch(plan))
    child = run.children[0]
    assert child.status is RunStatus.FAILED, (child.status, child.reason)
    assert child.error is not None and child.error.code == "agent-error"
    assert child.error.message == (
        "codex could not reach its model: 5/5: failed to lookup address (its retries are spent)"
    )
    await harness.orchestrator.shutdown("test over")
    left = [p.pid for p in processes_with_marker(run.run_id) if p.status() != "zombie"]
    assert left == []
