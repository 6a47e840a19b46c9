"""The permissions of a real Claude Code child (pinned, scripts/install-agents), started
through `subagent-host mcp` with `approvals: "client"`, asked of the human through MCP
elicitation by the SDK's own stdio client, offline against the loopback mock LLM
(protocol.md §22). The mock has the CLI run one shell command that writes a file
(`printf x > written.txt`), which Claude Code asks permission for; the test's
elicitation callback answers as a human would, and the file says what was answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext, ElicitationFnT

from tests.backends.fixtures.record_claude_stream import WRITE_COMMAND, WRITTEN
from tests.e2e.agents import claude_environment, needs_cli
from tests.e2e.mcp_client import McpServer, mcp_server, text_of
from tests.mock_llm import MockLLM

pytestmark = needs_cli("claude")

WAIT_SECONDS: Final = 50  # the face's most: the CLI's start, two model turns and the tool


class Human:
    """Answers each elicitation with `action`, choosing the option of kind `kind`; keeps
    what it was asked."""

    def __init__(self, action: str, kind: str | None = None) -> None:
        self.action = action
        self.kind = kind
        self.asked: list[types.ElicitRequestFormParams] = []
        self.was_asked = asyncio.Event()

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        self.was_asked.set()
        if self.action != "accept":
            return types.ElicitResult(action=self.action)  # type: ignore[arg-type]
        [option] = [
            option
            for option in params.requested_schema["properties"]["answer"]["oneOf"]
            if option["title"].endswith(f"({self.kind})")
        ]
        return types.ElicitResult(action="accept", content={"answer": option["const"]})


@asynccontextmanager
async def face(tmp_path: Path, human: ElicitationFnT | None) -> AsyncIterator[McpServer]:
    """`subagent-host mcp` whose claude children talk to a mock that has them write
    `work/written.txt`; its client elicits through `human`, or cannot without one."""
    (tmp_path / "work").mkdir()
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        env = claude_environment(tmp_path, mock.base_url)
        async with mcp_server(tmp_path, env=env, elicitation=human) as server:
            yield server


WRITER: Final = {
    "prompt": "write the file, please",
    "backend": "claude",
    "model": "mock-model",
    "tools": ["Bash"],
    "interactive": True,
    "approvals": "client",
    "waitSeconds": WAIT_SECONDS,
}
"""An interactive claude child that writes the file, waited for until its first turn ends."""


@pytest.mark.parametrize(
    ("action", "kind", "written"),
    [("accept", "allow-once", True), ("accept", "reject-once", False), ("decline", None, False)],
    ids=["allowed", "rejected", "declined"],
)
async def test_a_permission_is_asked_of_the_human_and_their_answer_goes_to_the_child(
    tmp_path: Path, action: str, kind: str | None, written: bool
) -> None:
    human = Human(action, kind)
    work = tmp_path / "work"
    async with face(tmp_path, human) as server:
        run = await server.ok("spawn", {**WRITER, "cwd": str(work)})
        assert run["children"][0]["turn"]["state"] == "waiting", run
        closed = await server.ok("close", {"runId": run["runId"]})
    assert closed["status"] == "completed", closed
    [asked] = human.asked
    assert asked.message == (
        f"Run {run['runId']}, child 0, asks to use the tool Bash (execute): {WRITE_COMMAND}"
    )
    kinds = [o["title"] for o in asked.requested_schema["properties"]["answer"]["oneOf"]]
    assert any(kind.endswith("(allow-once)") for kind in kinds), kinds
    assert any(kind.endswith("(reject-once)") for kind in kinds), kinds
    assert (work / WRITTEN).exists() is written


async def test_a_permission_asked_after_spawn_answered_is_asked_between_tool_calls(
    tmp_path: Path,
) -> None:
    """The elicitation belongs to no tool call: none is in progress when the child asks."""
    human = Human("accept", "allow-once")
    work = tmp_path / "work"
    async with face(tmp_path, human) as server:
        run = await server.ok("spawn", {**WRITER, "cwd": str(work), "waitSeconds": 0})
        assert run["status"] in ("queued", "running"), run
        await asyncio.wait_for(human.was_asked.wait(), WAIT_SECONDS)
        done = await server.ok("wait", {"runId": run["runId"], "waitSeconds": WAIT_SECONDS})
        assert done["children"][0]["turn"]["state"] == "waiting", done
        await server.ok("close", {"runId": run["runId"]})
    assert len(human.asked) == 1
    assert (work / WRITTEN).exists()


class AwayHuman:
    """Never answers: each elicitation waits until the face cancels it."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.asked.set()
        try:
            await asyncio.Event().wait()  # nobody is there
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        raise AssertionError("unreachable")


async def test_an_elicitation_left_open_is_cancelled_when_the_permission_times_out(
    tmp_path: Path,
) -> None:
    human = AwayHuman()
    work = tmp_path / "work"
    async with face(tmp_path, human) as server:
        launch = {**WRITER, "cwd": str(work), "permissionTimeoutMs": 1000}
        run = await server.ok("spawn", launch)
        assert run["children"][0]["turn"]["state"] == "waiting", run  # rejected: ended
        await asyncio.wait_for(human.cancelled.wait(), WAIT_SECONDS)
        await server.ok("close", {"runId": run["runId"]})
    assert not (work / WRITTEN).exists()


async def test_a_client_that_goes_away_while_it_is_asked_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    """The face's end cancels the question still open; `mcp_server` proves the face, its
    serve child and the claude child are gone, and that the face logged no traceback."""
    human = AwayHuman()
    work = tmp_path / "work"
    async with face(tmp_path, human) as server:
        await server.ok("spawn", {**WRITER, "cwd": str(work), "waitSeconds": 0})
        await asyncio.wait_for(human.asked.wait(), WAIT_SECONDS)
    assert not (work / WRITTEN).exists()


async def test_a_client_that_cannot_elicit_has_client_approvals_sent_as_policy(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    async with face(tmp_path, None) as server:
        result = await server.call("spawn", {**WRITER, "cwd": str(work)})
        assert not result.is_error, text_of(result)
        assert 'approvals: "client" was sent as "policy"' in text_of(result)
        assert result.structured_content is not None
        [child] = result.structured_content["children"]
        assert child["turn"]["state"] == "waiting", child  # nobody was waited for
        await server.ok("close", {"runId": result.structured_content["runId"]})
    # The policy of a child whose access is everything: allowed. Under `client`, nobody
    # here could have answered, and the command would not have run.
    assert (work / WRITTEN).exists()
