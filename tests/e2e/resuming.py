"""What the end-to-end resume tests of the real agent CLIs share (test_resume_sessions.py,
test_resume_access.py, test_resume_launch.py): a server whose pi talks to the mock LLM,
a first attempt that completes with a CLI session, and a resume of it approved by
`preflight {resume}`."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.agents import AGENT_BIN, PI_SPAWN, pi_environment, server_args
from tests.e2e.harness import ServerProcess, result_of, running_server
from tests.mock_llm import KEYWORD_ANSWER_NOW, MockLLM

FOLLOW_UP: Final = f"{KEYWORD_ANSWER_NOW} and now?"


def needs(*names: str) -> pytest.MarkDecorator:
    """Skipped unless every one of the pinned CLIs `names` is installed."""
    missing = [name for name in names if not (AGENT_BIN / name).exists()]
    return pytest.mark.skipif(
        bool(missing), reason=f"the pinned CLIs {missing} are not installed: scripts/install-agents"
    )


class PiServers:
    """Servers on a test's state directory whose pi talks to the mock LLM, one after
    another in one environment (pi's directories are made once per test)."""

    def __init__(self, tmp_path: Path, mock: MockLLM) -> None:
        self.tmp_path = tmp_path
        self.env = pi_environment(tmp_path, mock.openai_base_url)

    def start(self, *args: str) -> AbstractAsyncContextManager[ServerProcess]:
        """A server with `args` too, proved gone with all it started when it exits."""
        return running_server(*server_args(self.tmp_path), *args, env=self.env)

    async def approved_and_finished(self, *args: str) -> tuple[str, str]:
        """On a server of its own (with `args`), which has exited since: the run id of a
        first pi attempt that completed, and a token approving its resume."""
        async with self.start(*args) as server:
            run, token = await approved_run(server)
            await server.finish()
        return run["runId"], token


def resume_with(run_id: str, **overrides: Any) -> dict[str, Any]:
    """A `resume` request for `run_id` saying FOLLOW_UP, with these `overrides` if any."""
    resume: dict[str, Any] = {"runId": run_id, "message": FOLLOW_UP}
    return {**resume, "overrides": overrides} if overrides else resume


async def first_attempt(server: ServerProcess, spawn: dict[str, Any]) -> dict[str, Any]:
    """The completed run of a first attempt, whose child has a CLI session to resume."""
    run = await result_of(server, "spawn", {**spawn, "prompt": "remember MANGO7", "mode": "task"})
    assert run["status"] == "completed" and run["children"][0]["backendSessionId"], run
    return run


async def approved(server: ServerProcess, run_id: str) -> dict[str, Any]:
    """The accepted `preflight {resume}` of `run_id` (its contract and token)."""
    result = await result_of(server, "preflight", {"resume": resume_with(run_id)})
    assert result["accepted"] is True, result
    return result


async def approved_run(
    server: ServerProcess, spawn: dict[str, Any] = PI_SPAWN
) -> tuple[dict[str, Any], str]:
    """A first attempt's completed run and a token approving its resume."""
    run = await first_attempt(server, spawn)
    return run, (await approved(server, run["runId"]))["token"]
