"""ACP agents that break the protocol, configured as backends of a real server (protocol.md
§24.7): each ends its own child `failed` with a reason that says what went wrong, the
server goes on serving, and nothing of the child is left behind (`running_server`).

The agents are a few lines of Python each, written here: what they do wrong is the
whole of them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.agents import server_args
from tests.e2e.harness import running_server
from tests.e2e.live import LiveClient

# Reads one request, answers `initialize` with `result`, then waits for its stdin's end.
ANSWER_INITIALIZE: Final = """
import json, sys
request = json.loads(sys.stdin.readline())
print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": RESULT}), flush=True)
sys.stdin.read()
"""
AGENTS: Final[dict[str, str]] = {
    # Gone before it says anything.
    "quits": "import sys; sys.stderr.write('no model configured\\n'); sys.exit(3)",
    # Alive, reading, never answering: only the handshake's bound ends it.
    "silent": "import sys; sys.stdin.read()",
    "old": ANSWER_INITIALIZE.replace("RESULT", '{"protocolVersion": 2}'),
    "chatty": "import sys; print('Welcome to the agent!', flush=True); sys.stdin.read()",
}


def config_of(tmp_path: Path) -> Path:
    backends = {
        name: {"protocol": "acp", "executable": sys.executable, "args": ["-c", code]}
        for name, code in AGENTS.items()
    }
    config = tmp_path / "subagents.json"
    config.write_text(json.dumps({"backends": backends}))
    return config


@pytest.mark.parametrize(
    ("agent", "code", "reason"),
    [
        ("quits", "exit-status", "quits exited with status 3: no model configured"),
        ("silent", "spawn-failed", "silent did not begin its first turn within 2 s"),
        ("old", "protocol-error", "speaks protocol version 2, not 1"),
        ("chatty", "protocol-error", "a line that is not a JSON object: Welcome"),
    ],
)
async def test_an_agent_that_breaks_acp_fails_its_child_and_the_server_serves_on(
    tmp_path: Path, agent: str, code: str, reason: str
) -> None:
    args = (*server_args(tmp_path), "--config", str(config_of(tmp_path)))
    async with running_server(*args) as server:
        client = LiveClient(server)
        spawn: dict[str, Any] = {
            "backend": agent,
            "prompt": "hello",
            "mode": "task",
            "stallTimeoutMs": 2000,
            "cwd": str(tmp_path),
        }
        run = await client.result("spawn", spawn)
        [child] = run["children"]
        assert (run["status"], child["status"]) == ("failed", "failed"), run
        assert child["error"]["code"] == code, child["error"]
        assert reason in child["error"]["message"], child["error"]
        assert (await client.result("ping", {}))["pong"] is True
