"""The MCP Inspector's CLI lists `subagent-host mcp`'s tools with `--strict` and finds
nothing unportable in their schemas (protocol.md §22): no error (it exits 6,
`schema_unportable`, on a bare boolean schema) and no warning (a `type` array, a
`$ref` out of the document, a schema that constrains nothing).

The Inspector needs Node 22.19 or newer: tests/schema_readers.py says where it is looked
for; the test skips where there is none. tests/test_schema_portable.py checks the same
rules in Python wherever the suite runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Final

import psutil
import pytest

from subagent_host.mcp_face.tools import TOOLS
from tests.e2e.harness import server_executable
from tests.e2e.mcp_client import assert_gone, mcp_arguments
from tests.schema_readers import INSPECTOR_CLI, INSPECTOR_NODE, installed, node_at_least, run

pytestmark = pytest.mark.e2e

INSPECTOR_TIMEOUT_S: Final = 90.0  # within the suite's 120 s per test


async def test_the_inspector_in_strict_mode_finds_nothing_unportable_in_the_tools(
    tmp_path: Path,
) -> None:
    node = await node_at_least(INSPECTOR_NODE)
    cli = installed(INSPECTOR_CLI, "the MCP Inspector")
    home = tmp_path / "home"  # whatever the Inspector keeps of its own stays here
    home.mkdir()
    server = [server_executable(), *mcp_arguments(tmp_path)]
    argv = (node, str(cli), "--method", "tools/list", "--strict", "--", *server)
    try:
        code, out, err = await run(
            *argv, within_s=INSPECTOR_TIMEOUT_S, env={**os.environ, "HOME": str(home)}
        )
    finally:
        await assert_nothing_left(tmp_path / "state")
    assert (code, err.decode()) == (0, "")
    listed = json.loads(out)
    assert [tool["name"] for tool in listed["tools"]] == list(TOOLS)
    assert all("outputSchema" in tool for tool in listed["tools"])


async def assert_nothing_left(state_dir: Path) -> None:
    """The face and its serve child (each names the test's state directory) are gone once
    the Inspector has closed them; any left is ended, by pid, and the test fails."""
    started = _started_with(state_dir)
    try:
        await assert_gone(*started)
    except TimeoutError:
        left = [process for process in started if process.is_running()]
        for process in left:
            process.kill()
        pytest.fail(f"left running after the Inspector ended: {left}")


def _started_with(state_dir: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if str(state_dir) in process.cmdline() and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found
