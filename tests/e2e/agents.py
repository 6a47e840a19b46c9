"""What the end-to-end tests of the real agent CLIs share: where the pinned CLIs are,
a skip when one is missing, and waits on the process table (the `mock` LLM fixture
is in conftest.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final

import psutil
import pytest

from tests.e2e.harness import EXIT_TIMEOUT_S, state_args

ROOT: Final = Path(__file__).resolve().parents[2]
AGENT_BIN: Final = ROOT / "agents" / "node_modules" / ".bin"
POLL_INTERVAL_S: Final = 0.05  # between two scans of the process table


def needs_cli(name: str) -> list[pytest.MarkDecorator]:
    """Marks for a module of tests of one real CLI: e2e, skipped when it is missing."""
    return [
        pytest.mark.e2e,
        pytest.mark.skipif(
            not (AGENT_BIN / name).exists(),
            reason=f"the pinned {name} CLI is not installed: run scripts/install-agents",
        ),
    ]


def server_args(tmp_path: Path) -> tuple[str, ...]:
    return state_args(tmp_path / "state", "agent-tests")


async def wait_for_sleep(run_id: str) -> None:
    """Until the tool's `sleep` runs (a process carrying the run's marker)."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:  # the process table changes without telling anyone: poll it, bounded
            if await asyncio.to_thread(_sleep_runs, run_id):
                return
            await asyncio.sleep(POLL_INTERVAL_S)


def _sleep_runs(run_id: str) -> bool:
    return any(_is_sleep_of(process, run_id) for process in psutil.process_iter())


def _is_sleep_of(process: psutil.Process, run_id: str) -> bool:
    try:
        return process.name() == "sleep" and process.environ().get("SUBAGENT_HOST_RUN_ID") == run_id
    except psutil.Error:
        return False
