"""What the end-to-end tests of the real agent CLIs share: where the pinned CLIs are,
a skip when one is missing, each CLI's environment pointing it at the mock LLM, and
waits on the process table (the `mock` LLM fixture is in conftest.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Final

import psutil
import pytest

from tests.backends.fixtures.record_claude import OFFLINE
from tests.backends.fixtures.record_codex import API_KEY_VARIABLE, MODEL, codex_config
from tests.backends.fixtures.record_pi import NO_RETRIES, models
from tests.e2e.harness import EXIT_TIMEOUT_S, ServerProcess, result_of, state_args
from tests.e2e.test_runs import next_event
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_SLEEP_TOOL, MockLLM

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


PI_SPAWN: Final = {"backend": "pi", "model": "mock/mock-model", "tools": ["bash", "read"]}
CLAUDE_SPAWN: Final = {"backend": "claude", "model": "mock-model", "tools": ["Bash", "Read"]}
# The provider's key is not on the codex backend's allowlist: the spawn's env carries it.
CODEX_SPAWN: Final = {"backend": "codex", "model": MODEL, "env": {API_KEY_VARIABLE: "dummy"}}


def server_args(tmp_path: Path) -> tuple[str, ...]:
    return state_args(tmp_path / "state", "agent-tests")


def consent_required(tmp_path: Path) -> tuple[str, str]:
    """The options naming a configuration file that sets `require_egress_consent`."""
    config = tmp_path / "subagents.json"
    config.write_text(json.dumps({"require_egress_consent": True}))
    return ("--config", str(config))


def agent_path() -> str:
    """PATH for the server: the pinned CLIs first."""
    return f"{AGENT_BIN}:{psutil.Process().environ().get('PATH', '/usr/bin:/bin')}"


def pi_environment(tmp_path: Path, base_url: str, *, retries: bool = True) -> dict[str, str]:
    """The server's environment: pi on PATH, its agent directory pointing at the mock."""
    agent_dir = tmp_path / "pi-agent"
    agent_dir.mkdir()
    (agent_dir / "models.json").write_text(json.dumps(models(base_url)))
    if not retries:
        (agent_dir / "settings.json").write_text(json.dumps(NO_RETRIES))
    home = tmp_path / "home"
    home.mkdir()
    return {
        "PATH": agent_path(),
        "HOME": str(home),
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
    }


def claude_environment(tmp_path: Path, base_url: str, **extra: str) -> dict[str, str]:
    """The server's environment: claude on PATH, pointed at the mock, its own directories."""
    home, config = tmp_path / "home", tmp_path / "claude-config"
    home.mkdir()
    config.mkdir()
    return {
        "PATH": agent_path(),
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(config),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "dummy",
        **OFFLINE,
        **extra,
    }


def codex_environment(tmp_path: Path, base_url: str) -> dict[str, str]:
    """The server's environment: codex on PATH, its CODEX_HOME pointing at the mock."""
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(codex_config(base_url))
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": agent_path(), "HOME": str(home), "CODEX_HOME": str(codex_home)}


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


async def stop_in_the_middle_of_a_tool(
    server: ServerProcess, spawn: dict[str, Any], tool: str
) -> str:
    """Spawn an agent whose model has it run `sleep 300` in `tool`, stop the run while the
    sleep runs, and return the run id (the caller's `running_server` then proves that no
    process carrying it survived)."""
    run = await result_of(
        server, "spawn", {**spawn, "prompt": f"{KEYWORD_SLEEP_TOOL} please", "stream": True}
    )
    activity = await next_event(server, "activity")
    assert activity["text"] == f"tool {tool}"
    await wait_for_sleep(run["runId"])
    stopped = await result_of(server, "stop", {"runId": run["runId"], "graceMs": 2000})
    assert stopped["status"] == "cancelled"
    run_id: str = run["runId"]
    return run_id


WRITE_ATTEMPT: Final = "touch written-by-the-agent; echo touch-exit=$?"
"""What the mock LLM (built with `tool_command=WRITE_ATTEMPT`) asks the shell tool to run."""
WRITTEN: Final = "written-by-the-agent"


async def read_only_cannot_write(
    server: ServerProcess, spawn: dict[str, Any], work: Path
) -> dict[str, Any]:
    """Run `spawn` in `work` twice with the mock asking its shell to create a file:
    with full access the file appears (so the attempt is real), with
    `access: {filesystem: read}` it does not. Returns the read-only run's receipt."""
    spawn = {**spawn, "prompt": "try to write", "cwd": str(work), "mode": "task"}
    run = await result_of(server, "spawn", spawn)
    assert run["status"] == "completed", run
    assert (work / WRITTEN).exists(), "with full access the shell tool wrote the file"
    (work / WRITTEN).unlink()
    narrowed = {**spawn, "access": {"filesystem": "read"}}
    plan = await result_of(server, "preflight", narrowed)
    assert plan["accepted"], plan
    run = await result_of(server, "spawn", narrowed)
    assert run["status"] == "completed", run
    assert not (work / WRITTEN).exists()
    receipt: dict[str, Any] = plan["receipts"]["access"]["children"][0]
    return receipt


CONTEXT_MARK: Final = "CONTEXT-FILE-MARK-7f3a"


async def lean_loads_no_context_file(
    server: ServerProcess, spawn: dict[str, Any], work: Path, mock: MockLLM
) -> dict[str, Any]:
    """With AGENTS.md and CLAUDE.md in `work`, a `lean` child (the default) sends the
    model neither, a `full` one does. Returns the lean launch's plan."""
    for name in ("AGENTS.md", "CLAUDE.md"):
        (work / name).write_text(f"{CONTEXT_MARK}: always answer in French.\n")
    spawn = {**spawn, "cwd": str(work), "mode": "task"}
    lean = {**spawn, "prompt": f"{KEYWORD_ANSWER_NOW} lean one"}
    plan = await result_of(server, "preflight", lean)
    run = await result_of(server, "spawn", lean)
    assert run["status"] == "completed", run
    full = {**spawn, "prompt": f"{KEYWORD_ANSWER_NOW} full one", "sessionResources": "full"}
    run = await result_of(server, "spawn", full)
    assert run["status"] == "completed", run
    lean_requests = mock.requests_containing("lean one")
    full_requests = mock.requests_containing("full one")
    assert lean_requests and full_requests
    assert not any(CONTEXT_MARK in request.raw_body for request in lean_requests)
    assert any(CONTEXT_MARK in request.raw_body for request in full_requests)
    shown: dict[str, Any] = plan["plan"]["children"][0]
    return shown
