"""What a server loads before its first reply: the wire, not what runs need (protocol.md §2)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.e2e.harness import EXIT_TIMEOUT_S, assert_conforming, assert_nothing_left

# A server whose `ping` writes the modules loaded by then to stderr, one line.
RECORDING_SERVER = """
import sys
import subagent_host.handlers.ping as p
import subagent_host.handlers.table as t
answer = p.handle
def recording(params, ctx):
    sys.stderr.write("LOADED " + " ".join(sorted(sys.modules)) + "\\n")
    return answer(params, ctx)
t.METHODS = {**t.METHODS, "ping": t.METHODS["ping"]._replace(handler=recording)}
sys.argv = ["subagent-host", "--state-dir", sys.argv[1]]
from subagent_host.cli import main
raise SystemExit(main())
"""
# Loaded on first use: by a method's first call, by the first process looked at.
NOT_BEFORE_THE_FIRST_REPLY = (
    "psutil",
    "subagent_host.handlers.spawn",
    "subagent_host.planning.check",
    "subagent_host.planning.workflow",
    "subagent_host.handlers.preflight",
    "subagent_host.handlers.resume",
    "subagent_host.handlers.status",
    "subagent_host.handlers.stop",
    "subagent_host.handlers.agents_list",
    "subagent_host.agents.discovery",
    # Never loaded by a server: the schema is printed by `subagent-host schema`.
    "subagent_host.openrpc",
    "jsonschema",
    # Nor the MCP face and its SDK: `subagent-host mcp` is a client of a server.
    "subagent_host.mcp_face",
    "mcp",
    # Nor the ACP client's SDK and pydantic: loaded by the ACP driver alone.
    "subagent_host.backends.interactive.acp_client",
    "acp",
    "pydantic",
    # Nor pygls's connection: dispatch keeps its own request table (ARCHITECTURE.md).
    "pygls.protocol",
    "pygls.server",
)


def request(msg_id: int, method: str, params: dict[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()


async def test_the_first_ping_is_answered_before_launch_code_and_psutil_are_loaded(
    tmp_path: Path,
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        RECORDING_SERVER,
        str(tmp_path / "state"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    lines = [
        request(1, "ping", {}),
        request(2, "status", {}),
        request(3, "spawn", {"command": ["true"], "mode": "task"}),
    ]
    out, err = await asyncio.wait_for(proc.communicate(b"\n".join(lines) + b"\n"), EXIT_TIMEOUT_S)
    assert_nothing_left(proc.pid)
    assert proc.returncode == 0, err
    loaded = next(
        line.split()[1:] for line in err.decode().splitlines() if line.startswith("LOADED ")
    )
    assert set(loaded) & set(NOT_BEFORE_THE_FIRST_REPLY) == set()
    # ... and every method still works: its module is imported by its first call.
    messages = [json.loads(line) for line in out.splitlines()]
    assert_conforming([json.loads(line) for line in lines], messages)
    replies = {message["id"]: message for message in messages if "id" in message}
    assert replies[1]["result"]["pong"] is True
    assert replies[2]["result"] == {"runs": []}
    assert replies[3]["result"]["status"] == "completed", replies[3]
