"""The terminal `status` event carries the run's final output, over real stdio with real
processes: for a background run of every kind (single, tasks, chain, workflow) it is the
very output a `status` snapshot then shows, capped alike (protocol.md §11, §12), and every
message conforms to the schema."""

from __future__ import annotations

import asyncio
from typing import Any, Final

import pytest

from subagent_host.values.events import StatusEvent
from tests.e2e.client import client_of
from tests.e2e.harness import EXIT_TIMEOUT_S, ServerProcess, assert_conforming, running_server
from tests.e2e.test_runs import TERMINAL

BIG: Final = ["sh", "-c", "yes 'lorem ipsum' | head -c 100000"]  # over every cap, in words
OUTPUT_CAP_BYTES: Final = 48 * 1024
PARALLEL_CAP_BYTES: Final = 12 * 1024
MARKER: Final = "[output truncated]"

KINDS: Final[dict[str, dict[str, Any]]] = {
    "single": {"command": ["echo", "alone"]},
    "tasks": {"tasks": [{"command": ["echo", "left"]}, {"command": ["echo", "right"]}]},
    "chain": {
        "chain": [{"command": ["echo", "first"]}, {"command": ["cat"], "prompt": "{previous}"}]
    },
    "workflow": {
        "workflow": {
            "name": "pair",
            "task": "t",
            "chain": [
                {"command": ["echo", "step {task}"], "as": "one"},
                {"parallel": [{"command": ["echo", "a"]}, {"command": ["echo", "b"]}]},
                {"command": ["cat"], "prompt": "{outputs.one} and {previous}"},
            ],
        }
    },
}


async def background_run(server: ServerProcess, params: dict[str, Any]) -> tuple[Any, Any]:
    """Spawn in the background; the terminal `status` event, and the `status` snapshot asked
    after it, every message checked against the schema."""
    sent: list[Any] = []
    received: list[Any] = []

    async def request(method: str, request_params: dict[str, Any]) -> Any:
        server._next_id += 1
        message = {"jsonrpc": "2.0", "id": server._next_id, "method": method}
        sent.append({**message, "params": request_params})
        await server.send(sent[-1])
        while True:
            received.append(await server.receive())
            if received[-1].get("id") == message["id"]:
                return received[-1]["result"]

    async with asyncio.timeout(EXIT_TIMEOUT_S):
        run_id = (await request("spawn", {**params, "mode": "background"}))["runId"]
        while True:
            received.append(message := await server.receive())
            event = message.get("params", {})
            if event.get("runId") == run_id and event["type"] == "status":
                if event["status"] in TERMINAL:
                    break
        snapshot = await request("status", {"runId": run_id})
    assert_conforming(sent, received)
    return event, snapshot


@pytest.mark.parametrize("kind", list(KINDS))
async def test_the_terminal_status_event_carries_what_status_then_shows(kind: str) -> None:
    async with running_server() as server:
        ended, snapshot = await background_run(server, KINDS[kind])
        assert ended["status"] == snapshot["status"] == "completed", (ended, snapshot)
        assert ended["output"] == snapshot["output"], (ended, snapshot)
        assert ended["output"]["partial"] is False
        assert await server.finish() == (0, [])


async def test_the_final_output_is_capped_as_the_snapshots_are() -> None:
    async with running_server() as server:
        workflow = {"name": "big", "task": "t", "chain": [{"command": BIG}]}
        for params in ({"command": BIG}, {"chain": [{"command": BIG}]}, {"workflow": workflow}):
            ended, snapshot = await background_run(server, params)
            assert ended["output"] == snapshot["output"]
            output = ended["output"]
            assert output["truncated"] and output["bytes"] > OUTPUT_CAP_BYTES, output
            assert output["text"].rstrip("\n").endswith(MARKER), output["text"][-40:]
            assert len(output["text"].encode()) <= OUTPUT_CAP_BYTES + len(MARKER) + 1

        tasks, snapshot = await background_run(server, {"tasks": [{"command": BIG}] * 2})
        assert tasks["output"] == snapshot["output"]
        text = tasks["output"]["text"]
        assert tasks["output"]["truncated"] and text.count(MARKER) == 2, tasks["output"]
        assert len(text.encode()) <= 2 * (PARALLEL_CAP_BYTES + len(MARKER) + 64)
        assert await server.finish() == (0, [])


async def test_a_failed_run_carries_its_partial_output_and_the_client_reads_it_typed() -> None:
    async with running_server() as server, client_of(server) as host:
        run = await host.spawn(command=("sh", "-c", "echo some; exit 3"))
        async for event in host.events(run.run_id):
            last = event
        assert isinstance(last.event, StatusEvent) and last.event.status == "failed", last
        output = last.event.output
        assert output is not None and output.text == "some\n" and output.partial
