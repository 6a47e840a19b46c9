"""codex-acp and claude-agent-acp (pinned, scripts/install-agents) as configured ACP
backends of a real server, against the loopback mock LLM: a `--config` file names
`backends.<name> = {protocol: "acp", executable, args: [], env}`, the env being the
launch recipe of protocol.md §24.8 (what a user writes, PATH reaching node included).
Each agent runs a one-shot tool turn, and an interactive child that answers a second
message, is interrupted mid-tool and is stopped; claude-agent-acp's permission requests
are answered by the server's policy. These agents take seconds and hundreds of
megabytes each: every test starts one server and as few turns as it needs. Nothing
leaves 127.0.0.1; `running_server` proves that no process of a run survives its test."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Final

import attrs
import pytest

from tests.backends.fixtures.record_acp import WRITE_COMMAND, WRITTEN
from tests.e2e.agents import AGENT_BIN, agent_path, needs_cli, server_args
from tests.e2e.harness import EXIT_TIMEOUT_S, running_server
from tests.e2e.live import LiveClient, interrupted_mid_tool, there
from tests.e2e.test_acp_qwen import of_run, workdir
from tests.e2e.test_interactive_acp_claude import SLEEP_COMMAND as CLAUDE_SLEEP
from tests.e2e.test_interactive_acp_claude import claude_agent_acp_env
from tests.e2e.test_interactive_acp_codex import SLEEP_COMMAND as CODEX_SLEEP
from tests.e2e.test_interactive_acp_codex import codex_acp_env
from tests.mock_llm import (
    FINAL_TEXT_PREFIX,
    KEYWORD_ANSWER_NOW,
    KEYWORD_REPEAT,
    KEYWORD_SLEEP_TOOL,
    MockLLM,
)

TASK_S: Final = EXIT_TIMEOUT_S * 3
"""How long a `task`-mode spawn is waited for: the agent's start and two model calls."""


@attrs.frozen
class Vendor:
    """One agent as a configured backend: its name, its launch's env (given the mock),
    the command the mock's SLEEP-TOOL runs, whether it leaves that command running when
    its turn is cancelled (the server then ends it)."""

    name: str
    env: Callable[[Path, MockLLM], dict[str, str]]
    sleep_command: str
    leaves_commands: bool


def _codex_env(tmp_path: Path, mock: MockLLM) -> dict[str, str]:
    return {**codex_acp_env(tmp_path, mock.openai_base_url), "PATH": agent_path()}


def _claude_env(tmp_path: Path, mock: MockLLM) -> dict[str, str]:
    """Its recipe, and a settings.json in its config directory that starts its sessions
    in `acceptEdits`: in `auto`, its own starting mode, Claude Code consults the model
    to classify a command first (against the mock the sleep is never allowed) and adds
    a notice of its own about that mode to its answers. Its `default` is what the host's approvals
    choose (`policy` below)."""
    env = {**claude_agent_acp_env(tmp_path, mock.base_url), "PATH": agent_path()}
    settings = {"permissions": {"defaultMode": "acceptEdits"}}
    (Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json").write_text(json.dumps(settings))
    return env


CODEX: Final = Vendor("codex-acp", _codex_env, CODEX_SLEEP, leaves_commands=True)
CLAUDE: Final = Vendor("claude-agent-acp", _claude_env, CLAUDE_SLEEP, leaves_commands=False)
VENDORS: Final = [
    pytest.param(CODEX, id=CODEX.name, marks=needs_cli(CODEX.name)),
    pytest.param(CLAUDE, id=CLAUDE.name, marks=needs_cli(CLAUDE.name)),
]


@contextlib.asynccontextmanager
async def vendor_server(tmp_path: Path, vendor: Vendor, mock: MockLLM) -> AsyncIterator[LiveClient]:
    """A server whose `--config` names `vendor` an ACP backend talking to `mock`; the
    server's own environment is only PATH and a scratch HOME: what the agent needs is in
    the backend's `env`. It is asked to exit after the test."""
    config = tmp_path / "vendor-backend.json"
    backend = {
        "protocol": "acp",
        "executable": str(AGENT_BIN / vendor.name),
        "args": [],
        "env": vendor.env(tmp_path, mock),
    }
    config.write_text(json.dumps({"backends": {vendor.name: backend}}))
    home = tmp_path / "server-home"
    home.mkdir()
    env = {"PATH": agent_path(), "HOME": str(home)}
    async with running_server(*server_args(tmp_path), "--config", str(config), env=env) as server:
        yield LiveClient(server)
        await server.finish()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_one_shot_tool_turn_runs_its_command_in_the_cwd(
    tmp_path: Path, vendor: Vendor
) -> None:
    work = workdir(tmp_path)
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with vendor_server(tmp_path, vendor, mock) as client:
            spawn = {"backend": vendor.name, "cwd": str(work), "mode": "task", "stream": True}
            run = await client.result("spawn", {**spawn, "prompt": "list the files please"}, TASK_S)
            assert run["status"] == "completed", run
            child = run["children"][0]
            assert child["backend"] == vendor.name and child["status"] == "completed", child
            tools = of_run(client, run["runId"], "tool")
            assert [(t["phase"], t["kind"]) for t in tools] == [
                ("start", "execute"), ("end", "execute")
            ]  # fmt: skip
            assert tools[0]["toolId"] == tools[1]["toolId"] and tools[1]["isError"] is False
            assert (work / WRITTEN).read_text() == "x"  # the command ran, in the child's cwd
            assert child["output"]["text"].startswith(f"{FINAL_TEXT_PREFIX} scenario=after-tool")
    assert mock.requests  # the model was asked, over loopback only


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_second_message_an_interrupt_mid_tool_and_a_stop(
    tmp_path: Path, vendor: Vendor
) -> None:
    work = workdir(tmp_path)
    with MockLLM(sleep_command=vendor.sleep_command) as mock:
        async with vendor_server(tmp_path, vendor, mock) as client:
            first = {"backend": vendor.name, "cwd": str(work), "interactive": True, "stream": True}
            first["prompt"] = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}first"
            run_id = (await client.result("spawn", first))["runId"]
            assert (await client.answer(run_id)).endswith(" first")

            second = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}second"}
            assert (await client.result("run/send", second))["state"] == "delivered"
            assert (await client.answer(run_id)).endswith(" second")  # the model got it

            # Interrupted once its sleep runs, the turn ends `interrupted` and the sleep
            # too: claude-agent-acp ends it, codex-acp leaves it running and the server
            # ends what the turn left.
            await interrupted_mid_tool(client, run_id, f"{KEYWORD_SLEEP_TOOL} please")
            starts = [t for t in of_run(client, run_id, "tool") if t["phase"] == "start"]
            assert [t["kind"] for t in starts] == ["execute"], starts

            stopped = await client.result("stop", {"runId": run_id, "graceMs": 5000})
            assert stopped["status"] == "cancelled", stopped
            child = stopped["children"][0]
            assert child["status"] == "cancelled" and child["turn"]["count"] == 3, child
            if vendor.leaves_commands:
                assert child["resources"]["leftoversEnded"] >= 1, child


@pytest.mark.parametrize(
    "vendor", [pytest.param(CLAUDE, id=CLAUDE.name, marks=needs_cli(CLAUDE.name))]
)
async def test_policy_rejects_a_write_beyond_read_access(tmp_path: Path, vendor: Vendor) -> None:
    work = workdir(tmp_path)
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with vendor_server(tmp_path, vendor, mock) as client:
            spawn = {
                "backend": vendor.name,
                "cwd": str(work),
                "interactive": True,
                "stream": True,
                "prompt": "write it please",
                "approvals": "policy",
                "access": {"filesystem": "read"},
            }
            plan = await client.result("preflight", spawn)
            assert plan["accepted"], plan
            receipt = plan["receipts"]["access"]["children"][0]["approvals"]
            effects = {e["effect"]: e["enforcement"] for e in receipt["effects"]}
            # Its `other` tools may write unasked: the receipt does not claim host-hard.
            assert (receipt["approvals"], effects["filesystem-write"]) == ("policy", "best-effort")
            run_id = (await client.result("spawn", spawn))["runId"]
            answered = await client.next(run_id, type="permission", stage="answered")
            assert (answered["answeredBy"], answered["kind"]) == ("policy", "execute")
            assert answered["optionId"] == "reject"  # its reject-once option
            assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
            assert not there(work / WRITTEN)
            closed = await client.result("run/close", {"runId": run_id})
            assert closed["children"][0]["status"] == "completed", closed
            assert not there(work / WRITTEN)


@pytest.mark.parametrize(
    "vendor", [pytest.param(CODEX, id=CODEX.name, marks=needs_cli(CODEX.name))]
)
async def test_an_agent_without_an_asking_mode_refuses_policy_before_any_prompt(
    tmp_path: Path, vendor: Vendor
) -> None:
    """codex-acp offers no mode that asks before every edit and command: under `policy`
    its child fails before its first prompt, and the model is never asked."""
    work = workdir(tmp_path)
    with MockLLM() as mock:
        async with vendor_server(tmp_path, vendor, mock) as client:
            spawn = {"backend": vendor.name, "cwd": str(work), "approvals": "policy"}
            spawn["prompt"] = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}never"
            run = await client.result("spawn", {**spawn, "mode": "task"}, TASK_S)
            child = run["children"][0]
            assert (run["status"], child["status"]) == ("failed", "failed"), run
            assert child["error"]["code"] == "protocol-error", child
            assert child["error"]["message"].startswith("approvals-unsupported"), child
    assert mock.requests_containing("REPEAT:never") == []
