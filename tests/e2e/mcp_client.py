"""Drive `subagent-host mcp` with the official SDK's own stdio client, and prove afterwards
that it, its serve child and every run's processes are gone."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Final

import psutil
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import ElicitationFnT
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import CallToolResult, TextContent

from tests.e2e.harness import EXIT_TIMEOUT_S, assert_no_run_survives, server_executable

POLL_INTERVAL_S: Final = 0.05  # between two looks at the process table
SESSION: Final = "mcp-tests"


class McpServer:
    """A client session with `subagent-host mcp`, the processes behind it, and the runs it
    named."""

    def __init__(self, session: ClientSession, stderr: Path) -> None:
        self.session = session
        self.stderr = stderr
        self.run_ids: set[str] = set()
        self.face = _started_face()
        self.serve = _serve_child_of(self.face)

    async def call(
        self, tool: str, arguments: Mapping[str, Any], progress: ProgressFnT | None = None
    ) -> CallToolResult:
        result = await asyncio.wait_for(
            self.session.call_tool(tool, dict(arguments), progress_callback=progress),
            EXIT_TIMEOUT_S * 3,
        )
        content = result.structured_content
        if isinstance(content, dict) and isinstance(content.get("runId"), str):
            self.run_ids.add(content["runId"])
        return result

    async def ok(
        self, tool: str, arguments: Mapping[str, Any], progress: ProgressFnT | None = None
    ) -> dict[str, Any]:
        """The structured content of a call that must succeed."""
        result = await self.call(tool, arguments, progress)
        assert not result.is_error, result.content
        assert isinstance(result.structured_content, dict)
        return result.structured_content


def text_of(result: CallToolResult) -> str:
    """The text a tool answered (one text block, as every tool of the face answers)."""
    [block] = result.content
    assert isinstance(block, TextContent), block
    return block.text


def mcp_arguments(tmp_path: Path, *extra: str) -> list[str]:
    return ["mcp", "--state-dir", str(tmp_path / "state"), "--session", SESSION, *extra]


@contextlib.asynccontextmanager
async def mcp_server(
    tmp_path: Path,
    *extra: str,
    env: Mapping[str, str] | None = None,
    elicitation: ElicitationFnT | None = None,
) -> AsyncIterator[McpServer]:
    """`subagent-host mcp` started by the SDK's stdio client (one that can elicit when given
    its `elicitation` callback); on exit the client closes it (stdin first) and the test
    proves that nothing of it is left."""
    stderr = tmp_path / "mcp-stderr.log"
    parameters = StdioServerParameters(
        command=server_executable(), args=mcp_arguments(tmp_path, *extra), env=dict(env or {})
    )
    with stderr.open("w") as errlog:
        async with stdio_client(parameters, errlog=errlog) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicitation) as session:
                await asyncio.wait_for(session.initialize(), EXIT_TIMEOUT_S)
                server = McpServer(session, stderr)
                yield server
        await assert_gone(server.face, server.serve)
        assert_no_run_survives(server.run_ids)
    assert "Traceback" not in stderr.read_text()


async def assert_gone(*processes: psutil.Process) -> None:
    """Each process exits (or is a zombie waiting for its parent) within the bound."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:  # the process table changes without telling anyone: poll it, bounded
            if not any(_alive(process) for process in processes):
                return
            await asyncio.sleep(POLL_INTERVAL_S)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _cmdline(process: psutil.Process) -> list[str]:
    """Its command line; none for a process that has exited since it was listed."""
    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return []


def _started_face() -> psutil.Process:
    """The `subagent-host mcp` the stdio client started: a child of this test process."""
    faces = [
        process
        for process in psutil.Process().children()
        if _alive(process) and "mcp" in _cmdline(process)
    ]
    assert len(faces) == 1, faces
    return faces[0]


def _serve_child_of(face: psutil.Process) -> psutil.Process:
    children = face.children()
    assert len(children) == 1, children
    return children[0]
