"""Every MCP tool call is answered: one whose arguments the SDK's parser cannot read (an
escaped lone surrogate) or whose arguments are larger than a server message may be gets
an `isError` result in the server's words, and the face goes on (protocol.md §22)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Final

import psutil
import pytest

from tests.e2e.harness import EXIT_TIMEOUT_S, server_executable
from tests.e2e.mcp_client import assert_gone

pytestmark = pytest.mark.e2e

LINE_LIMIT: Final = 1 << 26  # replies are small; the bound only has to pass them
MCP_VERSION: Final = "2025-06-18"
SURROGATE_COMMAND: Final = (
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"spawn",'
    '"arguments":{"command":["echo","\\ud800"]}}}'
)
SURROGATE_RUN_ID: Final = (
    '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"status",'
    '"arguments":{"runId":"\\udfff-run"},"_meta":{"progressToken":7}}}'
)
UNPAIRED: Final = "the value contains an unpaired surrogate"


class RawMcp:
    """`subagent-host mcp` spoken to line by line, as a client that writes its own JSON."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()

    async def reply(self) -> dict[str, Any]:
        """The next message that answers a request (notifications are skipped)."""
        assert self.process.stdout is not None
        async with asyncio.timeout(EXIT_TIMEOUT_S * 3):
            while True:
                message = json.loads(await self.process.stdout.readline())
                if "id" in message:
                    return dict(message)


async def started(tmp_path: Path) -> tuple[RawMcp, psutil.Process]:
    process = await asyncio.create_subprocess_exec(
        server_executable(),
        "mcp",
        "--state-dir",
        str(tmp_path / "state"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=(tmp_path / "stderr.log").open("w"),
        limit=LINE_LIMIT,
    )
    mcp = RawMcp(process)
    await mcp.send(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": MCP_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
    )
    assert "result" in await mcp.reply()
    await mcp.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    [serve] = psutil.Process(process.pid).children()
    return mcp, serve


def refusal(reply: dict[str, Any], reply_id: int) -> str:
    assert reply["id"] == reply_id, reply
    result = reply["result"]
    assert result["isError"] is True, result
    [block] = result["content"]
    return str(block["text"])


async def finished(mcp: RawMcp, serve: psutil.Process, tmp_path: Path) -> None:
    assert mcp.process.stdin is not None
    mcp.process.stdin.close()
    assert await asyncio.wait_for(mcp.process.wait(), EXIT_TIMEOUT_S) == 0
    await assert_gone(serve)
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


async def test_a_call_with_a_lone_surrogate_is_refused_in_the_servers_words(
    tmp_path: Path,
) -> None:
    mcp, serve = await started(tmp_path)
    await mcp.send(SURROGATE_COMMAND)
    text = refusal(await mcp.reply(), 2)
    assert text.startswith("error -32602: invalid params: command[1]: " + UNPAIRED), text
    await mcp.send(SURROGATE_RUN_ID)
    text = refusal(await mcp.reply(), 3)
    assert text.startswith("error -32602: invalid params: runId: " + UNPAIRED), text
    # The face goes on: the next call is answered as ever.
    await mcp.send(
        '{"jsonrpc":"2.0","id":4,"method":"tools/call",'
        '"params":{"name":"agents_list","arguments":{}}}'
    )
    reply = await mcp.reply()
    assert reply["id"] == 4 and reply["result"].get("isError") is not True, reply
    await finished(mcp, serve, tmp_path)


async def test_a_call_larger_than_a_server_message_is_refused_in_the_servers_words(
    tmp_path: Path,
) -> None:
    mcp, serve = await started(tmp_path)
    big = "x" * (17 * 1024 * 1024)
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "spawn", "arguments": {"command": ["echo", big]}},
    }
    await mcp.send(json.dumps(call))
    text = refusal(await mcp.reply(), 2)
    assert text.startswith("error -32600: message too large: "), text
    assert text.endswith("(the limit is 16777216 bytes)"), text
    await finished(mcp, serve, tmp_path)
