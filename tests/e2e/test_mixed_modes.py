"""Mode per member, end to end: the real server, the pinned pi CLI against the mock LLM
(tests/mock_llm), agent definitions that say `subagent_mode`.

A `tasks` spawn that names no mode lets each member resolve its own: its definition's
`subagent_mode`, else the configured `default_mode`, else `background`. A run whose
members differ answers once its `task` members have ended, naming its background members
(`background: [{index, status}]`); those go on, their events follow the answer, and the
run ends once, its terminal `status` event carrying the final output (protocol.md §8.5).
The background members block on a FIFO the test writes to: the answer provably comes
before they end, with no sleep.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Final

from tests.e2e.agents import pi_environment
from tests.e2e.harness import EXIT_TIMEOUT_S, ServerProcess, result_of
from tests.e2e.test_agent_definitions import agent_server, define, user_dir, with_pi
from tests.e2e.test_runs import TERMINAL, call
from tests.gates import gate_at, gated_line
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_SLEEP_TOOL, MockLLM

MOCK_MODEL: Final = "mock/mock-model"
GATE: Final = "gate"


def define_agents(tmp_path: Path) -> None:
    """`waited` (`subagent_mode: task`) answers at once; `loose` (`background`) runs the
    mock's sleep tool, which the test's mock makes wait on the gate."""
    agents = user_dir(tmp_path) / "agents"
    common = {"model": MOCK_MODEL, "tools": "bash, read"}
    define(agents, "waited", "answers at once", subagent_mode="task", **common)
    define(agents, "loose", "waits for the gate", subagent_mode="background", **common)


async def run_events_until_terminal(server: ServerProcess, run_id: str) -> list[dict[str, Any]]:
    """The run's events up to and including its terminal `status` event."""
    events = []
    while True:
        event = await next_event_of(server, run_id)
        events.append(event)
        if event["type"] == "status" and event["status"] in TERMINAL:
            return events


async def next_event_of(server: ServerProcess, run_id: str) -> dict[str, Any]:
    """The run's next `run/event` (bounded: the whole wait is)."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:
            message = await server.receive()
            if message.get("method") == "run/event" and message["params"]["runId"] == run_id:
                params: dict[str, Any] = message["params"]
                return params


def mixed_answer(reply: dict[str, Any], notes: list[Any]) -> dict[str, Any]:
    """The answer of a mixed run: member 0 ended before it, member 1 goes on."""
    run: dict[str, Any] = reply["result"]
    assert run["status"] == "running", run
    waited, loose = run["children"]
    assert waited["status"] == "completed", waited
    assert loose["status"] in ("queued", "running"), loose
    assert run["background"] == [{"index": 1, "status": loose["status"]}], run
    before = [n["params"] for n in notes if n.get("method") == "run/event"]
    ended = [(e["type"], e.get("index"), e["status"]) for e in before if e["type"] == "child"]
    assert ("child", 0, "completed") in ended, before  # its events came before the answer
    assert not any(e["type"] == "status" and e["status"] in TERMINAL for e in before), before
    return run


@with_pi
async def test_agents_modes_make_a_mixed_run_answered_before_its_background_member_ends(
    tmp_path: Path,
) -> None:
    define_agents(tmp_path)
    gate = tmp_path / GATE
    with gate_at(gate) as writer, MockLLM(sleep_command=gated_line(gate)) as mock:
        env = pi_environment(tmp_path, mock.openai_base_url)
        async with agent_server(tmp_path, env) as server:
            tasks = [
                {"agent": "waited", "prompt": f"{KEYWORD_ANSWER_NOW} quick"},
                {"agent": "loose", "prompt": f"{KEYWORD_SLEEP_TOOL} slow"},
            ]
            reply, notes = await call(server, "spawn", {"tasks": tasks})
            run = mixed_answer(reply, notes)

            os.write(writer, b"go\n")  # only now can the background member end
            events = await run_events_until_terminal(server, run["runId"])
            ended = events[-1]
            assert ended["status"] == "completed", events
            assert [e for e in events if e["type"] == "status" and e["status"] in TERMINAL] == [
                ended
            ]
            final = await result_of(server, "status", {"runId": run["runId"]})
            assert final["status"] == "completed", final
            assert final["background"] == [{"index": 1, "status": "completed"}], final
            assert ended["output"] == final["output"], (ended, final)
            assert ended["output"]["text"].count("MOCK-FINAL:") == 2, ended
            assert "released go" in str(mock.requests[-1].body_object()), "the tool saw the gate"
            await server.finish()


@with_pi
async def test_an_agent_waited_for_beside_commands_in_the_default_background_mode(
    tmp_path: Path,
) -> None:
    """Commands have no definition: they take `default_mode` (here the default,
    `background`); the run waits for the `task` agent only, and is still mixed when read
    back by the next server on the state directory."""
    define_agents(tmp_path)
    gate = tmp_path / GATE
    with gate_at(gate) as writer, MockLLM() as mock:
        env = pi_environment(tmp_path, mock.openai_base_url)
        async with agent_server(tmp_path, env) as server:
            tasks = [
                {"agent": "waited", "prompt": f"{KEYWORD_ANSWER_NOW} quick"},
                {"command": ["sh", "-c", gated_line(gate)]},
            ]
            reply, notes = await call(server, "spawn", {"tasks": tasks})
            run = mixed_answer(reply, notes)
            os.write(writer, b"later\n")
            events = await run_events_until_terminal(server, run["runId"])
            assert events[-1]["status"] == "completed", events
            assert "[1] completed\nreleased later" in events[-1]["output"]["text"], events[-1]
            await server.finish()
        async with agent_server(tmp_path, env) as server:
            stored = await result_of(server, "status", {"runId": run["runId"]})
            assert stored["background"] == [{"index": 1, "status": "completed"}], stored
            await server.finish()


@with_pi
async def test_the_requests_mode_overrides_every_members_own(tmp_path: Path) -> None:
    define_agents(tmp_path)
    with MockLLM() as mock:
        env = pi_environment(tmp_path, mock.openai_base_url)
        async with agent_server(tmp_path, env) as server:
            tasks = [
                {"agent": "waited", "prompt": f"{KEYWORD_ANSWER_NOW} one"},
                {"agent": "loose", "prompt": f"{KEYWORD_ANSWER_NOW} two"},
            ]
            waited = await result_of(server, "spawn", {"tasks": tasks, "mode": "task"})
            assert waited["status"] == "completed" and "background" not in waited, waited

            reply, notes = await call(server, "spawn", {"tasks": tasks, "mode": "background"})
            loose = reply["result"]
            assert not [n for n in notes if n.get("method") == "run/event"], notes  # answered first
            assert loose["status"] in ("queued", "running") and "background" not in loose, loose
            events = await run_events_until_terminal(server, loose["runId"])
            assert events[0]["seq"] == 1 and events[-1]["status"] == "completed", events
            assert events[-1]["output"]["text"].count("MOCK-FINAL:") == 2, events[-1]
            await server.finish()
