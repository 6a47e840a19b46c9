"""ACP agents that break the protocol, configured as backends of a real server (protocol.md
§24.7): each ends its own child `failed` with a reason that says what went wrong, the
server goes on serving, and nothing of the child is left behind (`running_server`).

The agents are a few lines of Python each, written here: what they do wrong is the
whole of them."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
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


# What an agent that broke ACP only after the server's probe (§24.6) runs first: the
# probe's `initialize` is answered as ACP says, once (a marker file remembers it), so
# that the child, started after it, meets the agent's own misbehaviour.
PROBED_ONCE: Final = """
import json, os, sys
marker = sys.argv[1]
if not os.path.exists(marker):
    open(marker, "w").close()
    request = json.loads(sys.stdin.readline())
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"protocolVersion": 1}}
    print(json.dumps(answer), flush=True)
    sys.stdin.read()
    sys.exit(0)
"""


PROBE_WAIT_S: Final = 60.0


def config_of(tmp_path: Path, *, probed_once: bool) -> Path:
    backends = {
        name: {
            "protocol": "acp",
            "executable": sys.executable,
            "args": (
                ["-c", PROBED_ONCE + code, str(tmp_path / f"{name}.probed")]
                if probed_once
                else ["-c", code]
            ),
        }
        for name, code in AGENTS.items()
    }
    config = tmp_path / "subagents.json"
    config.write_text(json.dumps({"backends": backends}))
    return config


@pytest.mark.parametrize(
    ("agent", "reason"),
    [
        ("quits", "exited (status 3) before answering initialize"),
        ("silent", "no answer to initialize"),
        ("old", "it speaks ACP version 2, not 1"),
        ("chatty", "not a JSON"),
    ],
)
async def test_an_agent_that_breaks_acp_at_its_probe_is_refused_at_launch(
    tmp_path: Path, agent: str, reason: str
) -> None:
    """The server asks each configured agent `initialize` when it starts (§24.6): a launch
    of one that could not answer is refused with why, and no child is started."""
    args = (*server_args(tmp_path), "--config", str(config_of(tmp_path, probed_once=False)))
    async with running_server(*args) as server:
        client = LiveClient(server)
        spawn = {"backend": agent, "prompt": "hello", "mode": "task", "cwd": str(tmp_path)}
        # A launch waits for its agent's probe: up to 15 s for the silent one.
        error = (await client.reply("spawn", spawn, timeout_s=PROBE_WAIT_S))["error"]
        assert error["code"] == -32002, error
        assert f"the {agent} backend cannot run" in error["message"], error
        assert reason in error["message"], error
        assert (await client.result("ping", {}))["pong"] is True


@pytest.mark.parametrize(
    ("agent", "code", "reason"),
    [
        ("quits", "exit-status", "quits exited with status 3: no model configured"),
        ("silent", "spawn-failed", "silent did not begin its first turn within 2 s"),
        ("old", "protocol-error", "speaks protocol version 2, not 1"),
        ("chatty", "protocol-error", "a line that is not a JSON object: Welcome"),
    ],
)
async def test_an_agent_that_breaks_acp_after_its_probe_fails_its_child(
    tmp_path: Path, agent: str, code: str, reason: str
) -> None:
    """An agent that answered the probe and breaks ACP when its child runs: the child
    fails with a reason that says what went wrong; the server serves on."""
    args = (*server_args(tmp_path), "--config", str(config_of(tmp_path, probed_once=True)))
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


# The SDK's own agent (subagent_host/conformance/acp_agent.py) for what takes a working
# agent to misbehave mid-turn: each of its scenarios is a backend of its own.
TEST_AGENT: Final = ("-m", "subagent_host.conformance.acp_agent")
FLOOD: Final = 5_000
"""Updates of one word each: far more than a turn streams, few enough for a loaded machine."""


def misbehaving_agent_config(
    tmp_path: Path, scenario: str, env: dict[str, str] | None = None
) -> Path:
    state = tmp_path / "agent-state"
    args = [*TEST_AGENT, scenario, "--state", str(state), "--count", str(FLOOD)]
    backend: dict[str, Any] = {"protocol": "acp", "executable": sys.executable, "args": args}
    if env is not None:
        backend["env"] = env
    config = tmp_path / "subagents.json"
    config.write_text(json.dumps({"backends": {scenario: backend}}))
    return config


def said_nothing_of_the_huge_line(child: dict[str, Any], events: list[dict[str, Any]]) -> None:
    assert child["output"]["text"].startswith("echo: hello")
    assert "xxxx" not in child["output"]["text"]  # its 10 MB line was dropped whole


def read_the_flood_through(child: dict[str, Any], events: list[dict[str, Any]]) -> None:
    assert child["output"]["bytes"] >= 2 * FLOOD  # every chunk counted
    assert len([e for e in events if e["type"] == "message"]) >= FLOOD


def kept_nothing_of_another_session(child: dict[str, Any], events: list[dict[str, Any]]) -> None:
    assert [e for e in events if e["type"] in ("tool", "permission")] == []
    assert "not yours" not in child["output"]["text"]


def told_no_late_permission(child: dict[str, Any], events: list[dict[str, Any]]) -> None:
    assert [e for e in events if e["type"] == "permission"] == []


def refused_what_the_client_does_not_offer(
    child: dict[str, Any], events: list[dict[str, Any]]
) -> None:
    for method in ("fs/read_text_file", "terminal/create", "_test/ask"):
        assert f"{method}: error -32601" in child["output"]["text"], child["output"]


@pytest.mark.parametrize(
    ("scenario", "check"),
    [
        ("huge-line", said_nothing_of_the_huge_line),
        ("flood", read_the_flood_through),
        ("other-session", kept_nothing_of_another_session),
        ("late-permission", told_no_late_permission),
        ("ask-client", refused_what_the_client_does_not_offer),
    ],
)
async def test_what_an_agent_says_out_of_turn_or_out_of_bounds_is_passed_over(
    tmp_path: Path, scenario: str, check: Callable[[dict[str, Any], list[dict[str, Any]]], None]
) -> None:
    """A line over 8 MiB is dropped and counted, a flood is read through, another
    session's updates and a permission after the turn are not the child's, and requests
    for what the client does not offer are refused at once: each child completes."""
    args = (*server_args(tmp_path), "--config", str(misbehaving_agent_config(tmp_path, scenario)))
    async with running_server(*args) as server:
        client = LiveClient(server)
        spawn = {"backend": scenario, "prompt": "hello", "mode": "task", "cwd": str(tmp_path)}
        # Not redacted: a line of 10 MB of `x` would be one long base64-like run, cut
        # down before its line is read.
        run = await client.result("spawn", {**spawn, "stream": True, "redact": False})
        [child] = run["children"]
        assert (run["status"], child["status"]) == ("completed", "completed"), run
        status = await client.result("status", {"runId": run["runId"], "since": 0})
        check(child, status["events"])
        assert (await client.result("ping", {}))["pong"] is True


@pytest.mark.parametrize("key", [True, False])
async def test_an_agent_that_asks_to_authenticate_is_answered_only_from_the_childs_env(
    tmp_path: Path, key: bool
) -> None:
    """The agent refuses `session/new` until `authenticate` with its env_var method: with
    its variable in the backend's configured env the child is authenticated and
    completes; without it the child fails `auth-required` naming the variable (never a
    value), and the server serves on."""
    env = {"ACP_TEST_AGENT_KEY": "k"} if key else None
    config = misbehaving_agent_config(tmp_path, "auth", env)
    async with running_server(*server_args(tmp_path), "--config", str(config)) as server:
        client = LiveClient(server)
        spawn = {"backend": "auth", "prompt": "hello", "mode": "task", "cwd": str(tmp_path)}
        run = await client.result("spawn", spawn)
        [child] = run["children"]
        if key:
            assert (run["status"], child["status"]) == ("completed", "completed"), run
            assert child["output"]["text"].startswith("echo: hello")
        else:
            assert (run["status"], child["status"]) == ("failed", "failed"), run
            error = child["error"]
            assert error["code"] == "protocol-error", error
            assert error["message"].startswith("auth-required: "), error
            assert "test-key (env_var: ACP_TEST_AGENT_KEY)" in error["message"], error
        assert (await client.result("ping", {}))["pong"] is True
