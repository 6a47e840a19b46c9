"""Qwen Code (pinned, scripts/install-agents) as a configured ACP backend, through a real
server: a `--config` file names `backends.qwen = {protocol: "acp", executable: "qwen",
args}` (its ACP launch against the loopback mock LLM's chat completions), the server's
HOME a scratch directory. Everything a spawn of `pi`, `claude` or `codex` does, a spawn
of `backend: "qwen"` does: one-shot and interactive turns, interrupts, `maxTurns`, the
stall timeout, worktrees, chains, workflows and agent definitions. A qwen turn takes
seconds and half a gigabyte: each test starts as few as it needs. Nothing leaves
127.0.0.1; `running_server` proves that no process of a run survives its test."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

from subagent_host.client import Host
from tests.backends.fixtures.record_acp import SLEEP_COMMAND, WRITE_COMMAND, WRITTEN, qwen_args
from tests.e2e.agents import agent_path, needs_cli, server_args
from tests.e2e.harness import EXIT_TIMEOUT_S, assert_no_run_survives, running_server
from tests.e2e.live import LiveClient, gone, tool_process
from tests.e2e.mcp_client import mcp_server
from tests.e2e.test_agent_definitions import config_home, define, user_dir
from tests.e2e.test_worktrees import make_repository, remove_kept, worktrees_of
from tests.mock_llm import (
    FINAL_TEXT_PREFIX,
    KEYWORD_ANSWER_NOW,
    KEYWORD_REPEAT,
    KEYWORD_SLEEP_TOOL,
    MockLLM,
)

pytestmark = needs_cli("qwen")

Json = dict[str, Any]
QWEN: Final = {"backend": "qwen"}
QWEN_TASK_S: Final = EXIT_TIMEOUT_S * 3
"""How long a `task`-mode spawn of qwen is waited for: its start and a turn take
seconds each, many more on a busy machine."""
STALL_MS: Final = 8000
"""Longer than qwen takes to start and answer `initialize` on a busy machine (it is
silent meanwhile, and silence is what a stall is)."""
SHORT_SLEEP: Final = "sleep 12 # intentional-sleep: longer than the stall timeout"
"""A tool that runs in silence for longer than `STALL_MS` (qwen's shell tool refuses a
standalone sleep without such a comment)."""


def qwen_config(tmp_path: Path, mock: MockLLM) -> Path:
    """A `--config` file naming qwen an ACP backend that talks to `mock`."""
    config = tmp_path / "qwen-backend.json"
    backend = {
        "protocol": "acp",
        "executable": "qwen",
        "args": list(qwen_args(mock.openai_base_url)),
    }
    config.write_text(json.dumps({"backends": {"qwen": backend}}))
    return config


def qwen_environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The server's environment: the pinned CLIs on PATH, a scratch HOME (qwen keeps its
    settings and sessions there)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": agent_path(), "HOME": str(home), **extra}


@contextlib.asynccontextmanager
async def qwen_server(tmp_path: Path, mock: MockLLM, **extra_env: str) -> AsyncIterator[LiveClient]:
    """A server with the qwen backend configured; it is asked to exit after the test."""
    config = qwen_config(tmp_path, mock)
    env = qwen_environment(tmp_path, **extra_env)
    async with running_server(*server_args(tmp_path), "--config", str(config), env=env) as server:
        yield LiveClient(server)
        await server.finish()


def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return work


def of_run(client: LiveClient, run_id: str, kind: str) -> list[Json]:
    return [e for e in client.events if e["runId"] == run_id and e["type"] == kind]


async def finished(client: LiveClient, spawn: Json) -> Json:
    """Spawn in the background (a qwen run may take longer than a reply is waited for),
    wait for the `status` event that ends the run: its snapshot then."""
    run_id = (await client.result("spawn", spawn))["runId"]
    await client.first(
        lambda e: (
            e["runId"] == run_id
            and e["type"] == "status"
            and e["status"] not in ("queued", "running")
        )
    )
    return await client.result("status", {"runId": run_id})


# --- one-shot ----------------------------------------------------------------------------


async def test_a_text_turn_and_a_tool_turn_complete_with_their_answers(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with qwen_server(tmp_path, mock) as client:
            spawn = {**QWEN, "cwd": str(work), "mode": "task", "stream": True}
            text = {**spawn, "prompt": f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}hello"}
            run = await client.result("spawn", text, QWEN_TASK_S)
            assert run["status"] == "completed", run
            child = run["children"][0]
            assert child["output"]["text"].startswith(FINAL_TEXT_PREFIX)
            assert child["output"]["text"].endswith(" hello")
            assert child["usage"]["inputTokens"] > 0 and child["usage"]["outputTokens"] > 0
            assert child["backendSessionId"] and "turn" not in child  # it is not interactive
            assert [e["phase"] for e in of_run(client, run["runId"], "turn")] == ["start", "end"]
            assert of_run(client, run["runId"], "tool") == []
            assert not (work / WRITTEN).exists()

            tool_turn = {**spawn, "prompt": "list the files please"}
            tool = await client.result("spawn", tool_turn, QWEN_TASK_S)
            assert tool["status"] == "completed", tool
            start, end = of_run(client, tool["runId"], "tool")
            assert (start["phase"], start["kind"], end["phase"], end["kind"]) == (
                "start", "execute", "end", "execute"
            )  # fmt: skip
            assert start["toolId"] == end["toolId"] and end["isError"] is False
            assert (work / WRITTEN).read_text() == "x"  # the command ran, in the child's cwd
            assert tool["children"][0]["output"]["text"].startswith(
                f"{FINAL_TEXT_PREFIX} scenario=after-tool"
            )
    # The model was asked only by qwen, over the chat-completions API.
    assert mock.requests and all(r.path.endswith("/chat/completions") for r in mock.requests)


# --- interactive -------------------------------------------------------------------------


async def test_a_second_message_an_interrupt_mid_tool_and_a_close(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    with MockLLM(sleep_command=SLEEP_COMMAND) as mock:
        async with qwen_server(tmp_path, mock) as client:
            first = {**QWEN, "cwd": str(work), "interactive": True, "stream": True}
            first["prompt"] = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}first"
            run_id = (await client.result("spawn", first))["runId"]
            assert (await client.answer(run_id)).endswith(" first")

            second = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}second"}
            assert (await client.result("run/send", second))["state"] == "delivered"
            assert (await client.answer(run_id)).endswith(" second")  # the model got it

            sleepy = {"runId": run_id, "text": f"{KEYWORD_SLEEP_TOOL} please"}
            assert (await client.result("run/send", sleepy))["state"] == "delivered"
            started = await client.next(run_id, type="tool", phase="start")
            assert started["kind"] == "execute"
            sleep = await tool_process(run_id, "sleep")
            await client.result("run/interrupt", {"runId": run_id})
            assert (await client.turn_ended(run_id))["stopReason"] == "interrupted"
            assert await gone(sleep)  # the turn's command ended with it

            after = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}after"}
            assert (await client.result("run/send", after))["state"] == "delivered"
            assert (await client.answer(run_id)).endswith(" after")

            closed = await client.result("run/close", {"runId": run_id})
            assert closed["status"] == "completed", closed
            child = closed["children"][0]
            assert child["status"] == "completed" and child["output"]["text"].endswith(" after")
            assert child["turn"]["count"] == 4


async def test_max_turns_counts_prompt_rounds_of_an_interactive_child(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    with MockLLM() as mock:
        async with qwen_server(tmp_path, mock) as client:
            spawn = {**QWEN, "cwd": str(work), "interactive": True, "stream": True}
            spawn |= {"prompt": f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}one", "maxTurns": 1}
            run_id = (await client.result("spawn", spawn))["runId"]
            assert (await client.answer(run_id)).endswith(" one")  # turn 1 is whole
            status = await client.result("status", {"runId": run_id})
            assert status["status"] == "running" and status["children"][0]["turn"] == {
                "count": 1, "state": "waiting"
            }  # fmt: skip
            # The next message would begin turn 2: it is never written, and the child ends.
            more = {"runId": run_id, "text": f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}two"}
            assert (await client.result("run/send", more))["state"] == "queued"
            dropped = await client.next(run_id, type="input", state="dropped")
            assert dropped["text"] == more["text"]
            ended = await client.next(run_id, type="status")
            assert ended["status"] == "limit-reached", ended
            run = await client.result("status", {"runId": run_id})
            assert run["reachedLimit"] == "max-turns", run
            child = run["children"][0]
            assert child["turn"]["count"] == 1 and child["output"]["text"].endswith(" one")
    assert mock.requests_containing("REPEAT:two") == []


async def test_a_tool_running_longer_than_the_stall_timeout_is_no_stall(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    with MockLLM(sleep_command=SHORT_SLEEP) as mock:
        async with qwen_server(tmp_path, mock) as client:
            spawn = {**QWEN, "cwd": str(work), "stream": True}  # longer than a reply's wait
            spawn |= {"prompt": f"{KEYWORD_SLEEP_TOOL} please", "stallTimeoutMs": STALL_MS}
            run = await finished(client, spawn)
            assert run["status"] == "completed", run
            start, end = of_run(client, run["runId"], "tool")
            assert end["isError"] is False
    # The tool's sleep outlasted the stall timeout, and qwen said nothing meanwhile.
    assert any(SHORT_SLEEP in r.raw_body for r in mock.requests)


# --- where it runs, and what it is part of -----------------------------------------------


async def test_an_isolated_child_writes_in_its_worktree_not_in_the_repository(
    tmp_path: Path,
) -> None:
    repo = make_repository(tmp_path / "repo")
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with qwen_server(tmp_path, mock) as client:
            spawn = {**QWEN, "cwd": str(repo), "isolation": "worktree"}
            run = await finished(client, {**spawn, "prompt": "write it please"})
            assert run["status"] == "completed", run
            space = run["children"][0]["workspace"]
    assert not (repo / WRITTEN).exists()
    assert (Path(space["path"]) / WRITTEN).read_text() == "x"
    assert WRITTEN in space["changedFiles"] and space["kept"] is True, space
    assert space["path"] in worktrees_of(repo)
    remove_kept(repo)


async def test_a_chain_and_a_workflow_pass_a_qwen_childs_answer_on(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    with MockLLM() as mock:
        async with qwen_server(tmp_path, mock) as client:
            asked = {**QWEN, "prompt": f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}chained"}
            told = {"command": ["cat"], "prompt": "got: {previous}"}
            run = await finished(client, {"chain": [asked, told], "cwd": str(work)})
            assert run["status"] == "completed", run
            first, second = run["children"]
            assert first["backend"] == "qwen" and first["output"]["text"].endswith(" chained")
            assert second["output"]["text"] == f"got: {first['output']['text']}"

            item = {**QWEN, "prompt": f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}{{task}}"}
            steps = [{**item, "as": "asked"}, {"command": ["cat"], "prompt": "{outputs.asked}"}]
            workflow = {"name": "ask-qwen", "task": "flowed", "chain": steps}
            flowed = await finished(client, {"workflow": workflow, "cwd": str(work)})
            assert flowed["status"] == "completed", flowed
            answer = flowed["children"][0]["output"]["text"]
            assert flowed["children"][0]["backend"] == "qwen" and answer.endswith(" flowed")
            assert flowed["output"]["text"] == answer


async def test_an_agent_definition_on_qwen_leads_the_first_prompt_with_its_body(
    tmp_path: Path,
) -> None:
    body = "You are the WARDEN-9Z agent: keep it short."
    define(user_dir(tmp_path) / "agents", "warden", "guards the gate", body)
    prompt = f"{KEYWORD_ANSWER_NOW} report"
    with MockLLM() as mock:
        async with qwen_server(tmp_path, mock, XDG_CONFIG_HOME=str(config_home(tmp_path))) as c:
            spawn = {**QWEN, "agent": "warden", "prompt": prompt, "cwd": str(workdir(tmp_path))}
            run = await finished(c, spawn)
            assert run["status"] == "completed", run["children"]
            assert run["children"][0]["backend"] == "qwen"
    request = mock.requests_containing(prompt)[0]  # the turn's first (qwen may ask more)
    users = [m for m in json.loads(request.raw_body)["messages"] if m["role"] == "user"]
    said = json.dumps(users)
    assert body in said and said.index(body) < said.index(prompt), users


# --- faces ---------------------------------------------------------------------------------


async def test_the_mcp_face_names_qwen_among_its_backends_and_runs_it(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    with MockLLM() as mock:
        config = qwen_config(tmp_path, mock)
        env = qwen_environment(tmp_path)
        async with mcp_server(tmp_path, "--config", str(config), env=env) as server:
            tools = {tool.name: tool for tool in (await server.session.list_tools()).tools}
            backend = tools["spawn"].input_schema["properties"]["backend"]
            assert backend["examples"] == ["claude", "codex", "command", "pi", "qwen"]
            assert "`qwen`" in backend["description"]
            spawn = {**QWEN, "cwd": str(work), "waitSeconds": 50}
            spawn["prompt"] = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}faced"
            done = await server.ok("spawn", spawn)
            assert done["status"] == "completed", done
            assert done["children"][0]["backend"] == "qwen"
            assert done["output"]["text"].endswith(" faced")


async def test_the_client_library_spawns_qwen_by_its_configured_name(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    with MockLLM() as mock:
        args = (*server_args(tmp_path), "--config", str(qwen_config(tmp_path, mock)))
        async with Host.start(args, env=qwen_environment(tmp_path)) as host:
            prompt = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}library"
            async with asyncio.timeout(QWEN_TASK_S):
                run = await host.spawn(backend="qwen", prompt=prompt, cwd=str(work), mode="task")
            assert run.status == "completed" and run.children[0].backend == "qwen", run
            assert run.output is not None and run.output.text.endswith(" library")
    assert_no_run_survives({run.run_id})
