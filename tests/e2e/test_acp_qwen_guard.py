"""Qwen Code (pinned, scripts/install-agents) as a configured ACP backend of a real
server, against the loopback mock LLM (protocol.md §24.4, §24.5): the server answers its
permission requests from `access` (`policy`) or a client does (`client`); a stop or a
timeout cancels its turn (`session/cancel`) before its tree is ended; a resume loads its
session (`session/load`). `running_server` proves that nothing of any run survives."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Final

import psutil

from tests.backends.fixtures.record_acp import WRITE_COMMAND, WRITTEN, qwen_args
from tests.e2e.agents import agent_path, needs_cli, server_args
from tests.e2e.harness import EXIT_TIMEOUT_S, running_server
from tests.e2e.live import REMEMBERED, LiveClient, gone, permit, there, tool_process
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_SLEEP_TOOL, MockLLM

pytestmark = needs_cli("qwen")

SPAWN: Final = {"backend": "qwen", "interactive": True, "stream": True}
LONG_SLEEP: Final = "sleep 300 # intentional-sleep: a test ends it"
"""qwen's shell tool refuses a standalone long sleep without this comment."""
# A one-shot turn whose tool (LONG_SLEEP, scripted by the mock) runs until it is ended.
SLEEPING: Final = {"backend": "qwen", "stream": True, "prompt": f"{KEYWORD_SLEEP_TOOL} please"}
# Qwen reaches its tool within 3 to 7 s on a loaded machine.
TIMEOUT_MS: Final = 20_000
REFUSED: Final = "was canceled by the user"
"""What qwen records of a tool call whose permission was rejected."""


def qwen_server(tmp_path: Path, mock: MockLLM) -> tuple[tuple[str, ...], dict[str, str]]:
    """A server with qwen configured as an ACP backend: its arguments and environment
    (qwen on PATH, a scratch HOME where it keeps its settings and sessions)."""
    config = tmp_path / "subagents.json"
    backend = {
        "protocol": "acp",
        "executable": "qwen",
        "args": list(qwen_args(mock.openai_base_url)),
    }
    config.write_text(json.dumps({"backends": {"qwen": backend}}))
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": agent_path(), "HOME": str(home), "NO_COLOR": "1"}
    return (*server_args(tmp_path), "--config", str(config)), env


def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


async def test_policy_rejects_a_write_beyond_read_access_and_qwen_hears_of_it(
    tmp_path: Path,
) -> None:
    work = workdir(tmp_path)
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        args, env = qwen_server(tmp_path, mock)
        async with running_server(*args, env=env) as server:
            client = LiveClient(server)
            spawn = {
                **SPAWN,
                "cwd": str(work),
                "prompt": "write it please",
                "approvals": "policy",
                "access": {"filesystem": "read"},
            }
            plan = await client.result("preflight", spawn)
            assert plan["accepted"], plan
            receipt = plan["receipts"]["access"]["children"][0]
            assert receipt["removedTools"] == [] and receipt["approvals"]["approvals"] == "policy"
            effects = {e["effect"]: e for e in receipt["approvals"]["effects"]}
            # Its `other` tools may write unasked: the receipt does not claim host-hard.
            assert effects["filesystem-write"]["enforcement"] == "best-effort"
            run_id = (await client.result("spawn", spawn))["runId"]
            answered = await client.next(run_id, type="permission", stage="answered")
            assert (answered["answeredBy"], answered["kind"]) == ("policy", "execute")
            assert answered["optionId"] == "cancel"  # qwen's reject-once option
            await client.turn_ended(run_id)
            assert not there(work / WRITTEN)
            # The next turn's request tells the model its write was refused.
            said = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} REPEAT:next"}
            assert (await client.result("run/send", said))["state"] == "delivered"
            assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
            requests = mock.requests_containing("REPEAT:next")
            assert any(REFUSED in request.raw_body for request in requests), requests
            closed = await client.result("run/close", {"runId": run_id})
            assert closed["children"][0]["status"] == "completed", closed
            assert not there(work / WRITTEN)
            await server.finish()


async def test_a_client_allows_a_write_through_run_permit(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        args, env = qwen_server(tmp_path, mock)
        async with running_server(*args, env=env) as server:
            client = LiveClient(server)
            spawn = {**SPAWN, "cwd": str(work), "prompt": "write it please", "approvals": "client"}
            run_id = (await client.result("spawn", spawn))["runId"]
            asked = await client.next(run_id, type="permission", stage="asked")
            assert (asked["kind"], asked["summary"]) == ("execute", WRITE_COMMAND)
            status = await client.result("status", {"runId": run_id})
            assert [p["permissionId"] for p in status["pendingPermissions"]] == [
                asked["permissionId"]
            ]
            assert not there(work / WRITTEN)  # it waits for the answer
            await permit(client, asked, "allow-once")
            assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
            assert there(work / WRITTEN)
            closed = await client.result("run/close", {"runId": run_id})
            assert closed["children"][0]["status"] == "completed", closed
            await server.finish()


async def test_a_stop_mid_tool_cancels_the_turn_then_ends_the_tree(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    with MockLLM(sleep_command=LONG_SLEEP) as mock:
        args, env = qwen_server(tmp_path, mock)
        async with running_server(*args, env=env) as server:
            client = LiveClient(server)
            spawn = {**SLEEPING, "cwd": str(work)}
            run_id = (await client.result("spawn", spawn))["runId"]
            sleep = await tool_process(run_id, "sleep")
            stopped = await client.result("stop", {"runId": run_id, "graceMs": 5000})
            assert stopped["status"] == "cancelled", stopped
            assert stopped["children"][0]["status"] == "cancelled", stopped
            # The turn was cancelled through ACP first: it ended `interrupted`.
            ended = await client.turn_ended(run_id)
            assert ended["stopReason"] == "interrupted", ended
            assert await gone(sleep)
            await server.finish()


async def test_a_timeout_mid_tool_cancels_the_turn_and_the_child_is_timed_out(
    tmp_path: Path,
) -> None:
    work = workdir(tmp_path)
    with MockLLM(sleep_command=LONG_SLEEP) as mock:
        args, env = qwen_server(tmp_path, mock)
        async with running_server(*args, env=env) as server:
            client = LiveClient(server)
            # Long enough for qwen to start and run its tool on a loaded machine.
            spawn = {**SLEEPING, "cwd": str(work), "timeoutMs": TIMEOUT_MS}
            run_id = (await client.result("spawn", spawn))["runId"]
            sleep = await tool_process(run_id, "sleep")
            # The timeout's end of the child ends its tool; until then the server is silent
            # (longer than a read of its output waits), so the tool is what is waited for.
            bound = TIMEOUT_MS / 1000 + EXIT_TIMEOUT_S
            _, alive = await asyncio.to_thread(psutil.wait_procs, [sleep], timeout=bound)
            assert alive == []
            ended = await client.turn_ended(run_id)
            assert ended["stopReason"] == "interrupted", ended
            await client.next(run_id, type="status", status="timed-out")
            done: dict[str, Any] = await client.result("status", {"runId": run_id})
            child = done["children"][0]
            assert (done["status"], child["status"]) == ("timed-out", "timed-out"), done
            await server.finish()


async def test_a_resume_loads_qwens_session_and_the_model_sees_the_first_turn(
    tmp_path: Path,
) -> None:
    work = workdir(tmp_path)
    with MockLLM() as mock:
        args, env = qwen_server(tmp_path, mock)
        async with running_server(*args, env=env) as server:
            client = LiveClient(server)
            spawn = {**SPAWN, "cwd": str(work), "prompt": REMEMBERED}
            run_id = (await client.result("spawn", spawn))["runId"]
            await client.turn_ended(run_id)
            closed = await client.result("run/close", {"runId": run_id})
            session = closed["children"][0]["backendSessionId"]
            assert closed["status"] == "completed" and session, closed
            resume = {"runId": run_id, "message": f"{KEYWORD_ANSWER_NOW} REPEAT:second"}
            # Its tools cannot be narrowed on resume: only a new launch takes an access.
            narrowed = {**resume, "overrides": {"access": {"filesystem": "read"}}}
            refused = await client.result("preflight", {"resume": narrowed})
            assert not refused["accepted"]
            assert [d["code"] for d in refused["diagnostics"]] == ["override-not-allowed"]
            # Nor can it take a budget it could not enforce, on resume as at launch.
            budgeted = {**resume, "overrides": {"maxTokens": 1000}}
            refused = await client.result("preflight", {"resume": budgeted})
            assert [d["code"] for d in refused["diagnostics"]] == ["override-not-allowed"]
            assert "ACP agent reports tokens only" in refused["diagnostics"][0]["message"]
            token = (await client.result("preflight", {"resume": resume}))["token"]
            await client.result("resume", {"token": token})
            assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
            # The model was sent the first turn with the second (qwen also asks its model
            # other things of its own, such as a title, with the new message).
            requests = mock.requests_containing("REPEAT:second")
            assert any(REMEMBERED in request.raw_body for request in requests), requests
            closed = await client.result("run/close", {"runId": run_id})
            child = closed["children"][0]
            assert (child["attempt"], child["status"]) == (2, "completed"), closed
            assert child["backendSessionId"] == session  # the one session, loaded
            assert child["output"]["text"].endswith(" second")
            await server.finish()
