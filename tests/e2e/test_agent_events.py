"""The three real agent CLIs (pinned, scripts/install-agents) and an ACP agent (Qwen Code,
a configured backend) speak one language through the server: the same scripted turn
against the loopback mock LLM (text, one shell tool call, an answer) gives the same
sequence of `run/event` types and tool kinds for each, ids and native names aside
(protocol.md §11). Nothing leaves 127.0.0.1."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.agents import PI_SPAWN, needs_cli, pi_environment, server_args
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    ServerProcess,
    assert_conforming,
    result_of,
    running_server,
)
from tests.e2e.test_acp_qwen import qwen_config
from tests.e2e.test_agent_clis import Cli, each_cli
from tests.mock_llm import (
    DEFAULT_TOOL_COMMAND,
    FINAL_TEXT_PREFIX,
    KEYWORD_NARRATE_TOOL,
    NARRATION_TEXT,
    MockLLM,
)

Json = dict[str, Any]
AGENT_TYPES: Final = ("message", "tool", "usage")
# The turn as every CLI tells it: its text, the shell tool running, then the answer.
SAME_FOR_EVERY_CLI: Final = [
    "message",
    "tool start execute",
    "tool end execute",
    "message",
]


async def spawn_and_collect(server: ServerProcess, spawn: Json) -> tuple[Json, list[Json]]:
    """Spawn a `task`-mode run; its reply and every `run/event` sent before it, each
    message checked against the schema (schema/openrpc.json)."""
    server._next_id += 1
    request = {"jsonrpc": "2.0", "id": server._next_id, "method": "spawn", "params": spawn}
    await server.send(request)
    received: list[Json] = []
    async with asyncio.timeout(EXIT_TIMEOUT_S * 4):
        while not received or received[-1].get("id") != request["id"]:
            received.append(await server.receive())
    assert_conforming([request], received)
    reply = received.pop()
    assert "result" in reply, reply
    events = [message["params"] for message in received if message.get("method") == "run/event"]
    return reply["result"], events


def shape(events: list[Json]) -> list[str]:
    """Event types and tool kinds in order: consecutive messages as one, usage left out
    (each CLI reports usage as often as it does: pi per response, codex per exec)."""
    seen: list[str] = []
    for event in events:
        if event["type"] == "message" and seen[-1:] != ["message"]:
            seen.append("message")
        elif event["type"] == "tool":
            seen.append(f"tool {event['phase']} {event['kind']}")
    return seen


@each_cli()
async def test_a_narrated_tool_turn_gives_the_same_events_for_every_cli(
    tmp_path: Path, mock: MockLLM, cli: Cli
) -> None:
    env = cli.mock_environment(tmp_path, mock)
    async with running_server(*server_args(tmp_path), env=env) as server:
        spawn = {
            **cli.spawn,
            "prompt": f"{KEYWORD_NARRATE_TOOL} please",
            "mode": "task",
            "stream": True,
        }
        run, events = await spawn_and_collect(server, spawn)
        assert run["status"] == "completed", run
        await server.finish()
    # Stored like every event: the next server replays them from disk as they were sent.
    async with running_server(*server_args(tmp_path), env=env) as server:
        replayed = await result_of(server, "status", {"runId": run["runId"], "since": 0})
        await server.finish()
    child = run["children"][0]
    mine = [event for event in events if event["runId"] == run["runId"]]
    assert shape(mine) == SAME_FOR_EVERY_CLI
    assert "output" not in {event["type"] for event in mine}  # `stream: true`: not the raw lines
    # The text of each response, its last message marked final.
    texts: list[str] = []
    current = ""
    for event in (e for e in mine if e["type"] == "message"):
        current += event["text"]
        if event.get("final"):
            texts, current = [*texts, current], ""
    assert texts[0] == NARRATION_TEXT and texts[1].startswith(FINAL_TEXT_PREFIX)
    assert current == "" and texts[1] == child["output"]["text"]
    start, end = [event for event in mine if event["type"] == "tool"]
    assert start["toolId"] == end["toolId"] and start["name"] == end["name"] == cli.tool
    assert DEFAULT_TOOL_COMMAND in start["summary"] and end["isError"] is False
    usage = [event["usage"] for event in mine if event["type"] == "usage"]
    assert usage and usage[-1] == child["usage"]
    assert [e for e in replayed["events"] if e["type"] in AGENT_TYPES] == [
        e for e in mine if e["type"] in AGENT_TYPES
    ]


@each_cli()
async def test_a_raw_stream_also_sends_the_clis_own_lines(
    tmp_path: Path, mock: MockLLM, cli: Cli
) -> None:
    env = cli.mock_environment(tmp_path, mock)
    async with running_server(*server_args(tmp_path), env=env) as server:
        spawn = {**cli.spawn, "prompt": "look around", "mode": "task", "stream": "raw"}
        run, events = await spawn_and_collect(server, spawn)
        assert run["status"] == "completed", run
        await server.finish()
    types = {event["type"] for event in events}
    assert {"output", *AGENT_TYPES} <= types
    raw = "".join(event["text"] for event in events if event["type"] == "output")
    assert raw.startswith("{") and FINAL_TEXT_PREFIX in raw


ADAPTER_AND_ACP: Final[dict[str, Json]] = {"pi": PI_SPAWN, "qwen": {"backend": "qwen"}}
"""A CLI adapter's spawn and a configured ACP agent's (tests/e2e/test_acp_qwen.py)."""


@pytest.mark.parametrize(
    "names", [pytest.param(tuple(ADAPTER_AND_ACP), marks=[*needs_cli("pi"), *needs_cli("qwen")])]
)
async def test_an_acp_agent_gives_the_same_events_as_the_cli_adapters(
    tmp_path: Path, mock: MockLLM, names: tuple[str, ...]
) -> None:
    """Qwen Code as a configured ACP backend, and pi, on one server: the same narrated
    turn, the same event types and tool kinds."""
    env = pi_environment(tmp_path, mock.openai_base_url)
    config = qwen_config(tmp_path, mock)
    shapes: dict[str, list[str]] = {}
    async with running_server(*server_args(tmp_path), "--config", str(config), env=env) as server:
        for name in names:
            prompt = f"{KEYWORD_NARRATE_TOOL} please"
            params = {**ADAPTER_AND_ACP[name], "prompt": prompt, "mode": "task", "stream": True}
            run, events = await spawn_and_collect(server, params)
            assert run["status"] == "completed", run
            shapes[name] = shape([e for e in events if e["runId"] == run["runId"]])
        await server.finish()
    assert shapes["qwen"] == shapes["pi"] == SAME_FOR_EVERY_CLI
