"""The three real agent CLIs (pinned, scripts/install-agents) through the server, against
the loopback mock LLM, in the shapes they share: completion with usage and a session,
a resume through preflight and its token, a stop in the middle of a tool, an unreachable
model, and lean session resources. What differs between the CLIs is a parameter
(`Cli`); what only one CLI has stays in its own module (test_pi.py, test_claude.py,
test_codex.py). Nothing leaves 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.e2e.agents import (
    CLAUDE_SPAWN,
    CODEX_SPAWN,
    PI_SPAWN,
    claude_environment,
    codex_environment,
    lean_loads_no_context_file,
    needs_cli,
    pi_environment,
    server_args,
    stop_in_the_middle_of_a_tool,
)
from tests.e2e.harness import assert_no_run_survives, result_of, running_server
from tests.e2e.resuming import approved, first_attempt
from tests.mock_llm import MockLLM

Json = dict[str, Any]
# Far shorter than the CLIs' own retries (pi's 2 + 4 + 8 s, claude's ten, codex's for
# ever), longer than any of them takes to say it retries.
STALL_MS = 8000


@attrs.frozen
class Cli:
    """One CLI as these tests drive it, and what it alone is checked for."""

    name: str
    spawn: dict[str, Any]
    base_url: Callable[[MockLLM], str]
    """The mock's address in the form this CLI's API client takes."""
    environment: Callable[[Path, str], dict[str, str]]
    unreachable_environment: Callable[[Path, str], dict[str, str]]
    """The environment for a model nobody answers (retries turned down where they can be)."""
    tool: str
    """The name of the shell tool in this CLI's activity events."""
    lean_flag: str
    """What in a lean child's argv keeps the context files out."""
    completed: Callable[[Json, MockLLM], None]
    """Checks of a completed child and of what the mock was asked."""
    resumed: Callable[[Json, str], None]
    """Checks of the resumed child and of the resumed turn's request body."""
    unreachable_spawn: Mapping[str, Any]
    unreachable: Callable[[Json], None]
    """Checks of the run whose model nobody answers."""
    retry_reason: str = ""
    """What the CLI says while it retries a model on a closed port (in the run's error)."""
    tool_outlives_sigterm: bool = False
    """Its shell tool survives a SIGTERM of the CLI: the stop itself must have ended it."""

    def mock_environment(self, tmp_path: Path, mock: MockLLM) -> dict[str, str]:
        """The server's environment in which this CLI talks to `mock`."""
        return self.environment(tmp_path, self.base_url(mock))


def pi_completed(child: Json, mock: MockLLM) -> None:
    assert all(request.path.startswith("/v1/") for request in mock.requests)


def claude_completed(child: Json, mock: MockLLM) -> None:
    assert child["usage"]["costUsd"] > 0
    # It talked to the mock only: its probe of the base URL, then the messages API.
    assert {request.path.split("?")[0] for request in mock.requests} == {"/", "/v1/messages"}


def codex_completed(child: Json, mock: MockLLM) -> None:
    assert "costUsd" not in child["usage"] or child["usage"]["costUsd"] is None
    assert mock.requests and all(r.path == "/v1/responses" for r in mock.requests)
    assert all(r.headers.get("authorization") == "Bearer dummy" for r in mock.requests)


def nothing_more(*_: Any) -> None:
    pass


def claude_resumed(child: Json, last: str) -> None:
    assert "items=5 tool_results=1" in child["output"]["text"]
    assert "mock-tool-ran" in last  # the tool's result, sent again with the conversation


def failed_with_agent_error(run: Json) -> None:
    assert run["status"] == "failed", run
    assert run["children"][0]["error"]["code"] == "agent-error"


def claude_unreachable(run: Json) -> None:
    failed_with_agent_error(run)
    assert "Unable to connect" in run["children"][0]["error"]["message"]


def codex_unreachable(run: Json) -> None:
    # codex reconnects for ever: its notices are not progress, so the stall timeout ends it.
    failed_with_agent_error(run)
    message = run["children"][0]["error"]["message"]
    assert message.startswith("codex could not reach its model: waiting for network"), message
    assert run["children"][0]["backendSessionId"]  # codex had started its thread


PI = Cli(
    name="pi",
    spawn=PI_SPAWN,
    base_url=lambda mock: mock.openai_base_url,
    environment=pi_environment,
    unreachable_environment=lambda tmp_path, url: pi_environment(tmp_path, url, retries=False),
    tool="bash",
    lean_flag="--no-context-files",
    completed=pi_completed,
    resumed=nothing_more,
    unreachable_spawn={},
    unreachable=failed_with_agent_error,
    retry_reason="Connection error",
)
CLAUDE = Cli(
    name="claude",
    spawn=CLAUDE_SPAWN,
    base_url=lambda mock: mock.base_url,
    environment=claude_environment,
    unreachable_environment=lambda tmp_path, url: claude_environment(
        tmp_path, url, CLAUDE_CODE_MAX_RETRIES="1"
    ),
    tool="Bash",
    lean_flag="--safe-mode",
    completed=claude_completed,
    resumed=claude_resumed,
    unreachable_spawn={},
    unreachable=claude_unreachable,
    retry_reason="could not reach its model: ",
    tool_outlives_sigterm=True,
)
CODEX = Cli(
    name="codex",
    spawn=CODEX_SPAWN,
    base_url=lambda mock: mock.openai_base_url,
    environment=codex_environment,
    unreachable_environment=codex_environment,
    tool="shell",
    lean_flag="project_doc_max_bytes=0",
    completed=codex_completed,
    resumed=nothing_more,
    unreachable_spawn={"stallTimeoutMs": STALL_MS},
    unreachable=codex_unreachable,
    retry_reason="Connection failed",
)


def each_cli(*names: str) -> pytest.MarkDecorator:
    """A test once for each CLI (those `names`, else all three), skipped where missing."""
    chosen = [cli for cli in (PI, CLAUDE, CODEX) if not names or cli.name in names]
    return pytest.mark.parametrize(
        "cli", [pytest.param(cli, marks=needs_cli(cli.name), id=cli.name) for cli in chosen]
    )


pytestmark = each_cli()


async def test_a_run_completes_with_the_mocks_answer_usage_and_a_session(
    tmp_path: Path, mock: MockLLM, cli: Cli
) -> None:
    env = cli.mock_environment(tmp_path, mock)
    async with running_server(*server_args(tmp_path), env=env) as server:
        spawn = {**cli.spawn, "prompt": "look around", "mode": "task"}
        run = await result_of(server, "spawn", spawn)
        child = run["children"][0]
        assert run["status"] == "completed", run
        assert child["output"]["text"].startswith("MOCK-FINAL: scenario=after-tool")
        assert child["usage"]["inputTokens"] > 0 and child["usage"]["outputTokens"] > 0
        assert child["backendSessionId"]
        await server.finish()
    cli.completed(child, mock)


async def test_a_resumed_child_continues_its_session(
    tmp_path: Path, mock: MockLLM, cli: Cli
) -> None:
    env = cli.mock_environment(tmp_path, mock)
    async with running_server(*server_args(tmp_path), env=env) as server:
        first = await first_attempt(server, cli.spawn)
        session = first["children"][0]["backendSessionId"]
        approval = await approved(server, first["runId"])
        assert approval["contract"]["backendSessionId"] == session
        resumed = await result_of(server, "resume", {"token": approval["token"], "mode": "task"})
        child = resumed["children"][0]
        assert resumed["status"] == "completed" and child["attempt"] == 2, resumed
        assert child["backendSessionId"] == session
        await server.finish()
    # The resumed turn sent the earlier conversation again.
    last = mock.requests[-1].raw_body
    assert "MANGO7" in last and "and now?" in last
    cli.resumed(child, last)


async def test_stop_in_the_middle_of_a_tool_leaves_nothing(
    tmp_path: Path, mock: MockLLM, cli: Cli
) -> None:
    env = cli.mock_environment(tmp_path, mock)
    async with running_server(*server_args(tmp_path), env=env) as server:
        run_id = await stop_in_the_middle_of_a_tool(server, cli.spawn, cli.tool)
        if cli.tool_outlives_sigterm:
            # The tool runs in a session of its own and outlives a SIGTERM of the CLI:
            # the stop sequence itself must have ended it, not the server's exit.
            assert_no_run_survives({run_id})
        await server.finish()
    # running_server proved that no process carrying the run's marker survived.


async def test_an_unreachable_model_ends_the_run(tmp_path: Path, cli: Cli) -> None:
    with MockLLM() as gone:
        base_url = cli.base_url(gone)
    env = cli.unreachable_environment(tmp_path, base_url)
    async with running_server(*server_args(tmp_path), env=env) as server:
        spawn = {**cli.spawn, "prompt": "hello", **cli.unreachable_spawn, "mode": "task"}
        run = await result_of(server, "spawn", spawn)
        cli.unreachable(run)
        await server.finish()


async def test_a_model_retried_for_the_stall_timeout_fails_with_the_clis_reason(
    tmp_path: Path, cli: Cli
) -> None:
    with MockLLM() as gone:
        base_url = cli.base_url(gone)  # a port on 127.0.0.1 nothing listens on now
    env = cli.environment(tmp_path, base_url)  # the CLI's own retries, as configured
    async with running_server(*server_args(tmp_path), env=env) as server:
        spawn = {**cli.spawn, "prompt": "hello", "stallTimeoutMs": STALL_MS, "mode": "task"}
        run = await result_of(server, "spawn", spawn)
        failed_with_agent_error(run)
        assert cli.retry_reason in run["children"][0]["error"]["message"], run
        await server.finish()
    # running_server proved that no process carrying the run's marker survived.


async def test_a_lean_child_loads_no_context_file_and_a_full_one_does(
    tmp_path: Path, mock: MockLLM, cli: Cli
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = cli.mock_environment(tmp_path, mock)
    async with running_server(*server_args(tmp_path), env=env) as server:
        shown = await lean_loads_no_context_file(server, cli.spawn, work, mock)
        await server.finish()
    assert shown["sessionResources"] == "lean" and cli.lean_flag in shown["argv"]
