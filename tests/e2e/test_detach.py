"""`run/detach {runId}` over real stdio: a waiting `task`-mode request is answered, the run goes on.

The notification answers every `task`-mode `spawn` or `resume` still waiting on
that run with the run's current snapshot (a result, not an error) and leaves
its children running; other runs' waiting requests are untouched. The
notification itself is never answered: a detach of an unknown or ended run is
ignored, and sent as a request it is -32601.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

import psutil

from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    ServerProcess,
    error_of,
    result_of,
    running_server,
    state_args,
)
from tests.e2e.test_resume import SLOW_ON_REQUEST, approve, failed_run

METHOD_NOT_FOUND: Final = -32601
SLEEPER: Final = ["sleep", "30"]


async def send_task(server: ServerProcess, msg_id: str, method: str, params: Any) -> str:
    """Send a `task`-mode request; the id of the run it started, once its child runs."""
    params = {**params, "mode": "task"}
    await server.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:
            message = await server.receive()
            assert message.get("id") != msg_id, message  # answered before its child ran
            event = message.get("params") or {}
            if event.get("type") == "child" and event.get("status") == "running":
                run_id: str = event["runId"]
                return run_id


async def detach(server: ServerProcess, run_id: str) -> None:
    await server.send({"jsonrpc": "2.0", "method": "run/detach", "params": {"runId": run_id}})


async def answers_until(server: ServerProcess, msg_id: str) -> list[dict[str, Any]]:
    """Every answer (not notification) up to and including the one to `msg_id`."""
    answers = []
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:
            message = await server.receive()
            if "id" in message:
                answers.append(message)
                if message["id"] == msg_id:
                    return answers


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_a_detached_task_spawn_is_answered_running_and_its_run_goes_on(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        first = await send_task(server, "first", "spawn", {"command": SLEEPER})
        second = await send_task(server, "second", "spawn", {"command": SLEEPER})
        assert first != second

        await detach(server, first)
        answers = await answers_until(server, "first")
        assert [a["id"] for a in answers] == ["first"], answers  # the other one still waits
        snapshot = answers[0]["result"]
        assert snapshot["runId"] == first and snapshot["status"] == "running", snapshot
        child = snapshot["children"][0]
        assert child["status"] == "running" and alive(child["pid"]), child

        # The detached run goes on; the other request is still waiting for its run.
        status = await result_of(server, "status", {"runId": first})
        assert status["status"] == "running", status
        await server.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
        assert [a["id"] for a in await answers_until(server, "ping")] == ["ping"]

        stopped = await result_of(server, "stop", {"runId": first, "graceMs": 1000})
        assert stopped["status"] == "cancelled" and not alive(child["pid"]), stopped
        await server.send(
            {"jsonrpc": "2.0", "id": "stop", "method": "stop", "params": {"runId": second}}
        )
        answers = await answers_until(server, "stop")
        if [a["id"] for a in answers] == ["stop"]:  # the stop's answer may come first
            answers += await answers_until(server, "second")
        by_id = {a["id"]: a for a in answers}
        assert by_id["second"]["result"]["status"] == "cancelled", by_id  # ran to its end
        assert by_id["stop"]["result"]["status"] == "cancelled", by_id
        await server.finish()


async def test_detaching_an_unknown_an_ended_or_a_foreign_run_does_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with running_server(*state_args(state, "other")) as other:
        foreign = (await result_of(other, "spawn", {"command": ["true"], "mode": "task"}))["runId"]
        await other.finish()
    async with running_server(*state_args(state)) as server:
        ended = (await result_of(server, "spawn", {"command": ["true"], "mode": "task"}))["runId"]
        waiting = await send_task(server, "waiting", "spawn", {"command": SLEEPER})
        for run_id in ("no-such-run", ended, foreign, waiting[:8]):
            await detach(server, run_id)
        await server.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
        # Only the ping is answered: no answer to a notification, the task still waits.
        assert [a["id"] for a in await answers_until(server, "ping")] == ["ping"]

        error = await error_of(server, "run/detach", {"runId": waiting})
        assert error["code"] == METHOD_NOT_FOUND and "notification" in error["message"], error
        await detach(server, waiting)  # as a notification it works
        answers = await answers_until(server, "waiting")
        assert answers[-1]["result"]["status"] == "running", answers
        await result_of(server, "stop", {"runId": waiting, "graceMs": 1000})
        await server.finish()


async def test_a_detached_task_resume_is_answered_with_its_running_attempt(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        run_id = (await failed_run(server, {"command": SLOW_ON_REQUEST, "prompt": "quick"}))[
            "runId"
        ]
        token = (await approve(server, {"runId": run_id, "message": "slow"}))["token"]
        resumed = await send_task(server, "resume", "resume", {"token": token})
        assert resumed == run_id

        await detach(server, run_id)
        answers = await answers_until(server, "resume")
        snapshot = answers[-1]["result"]
        assert snapshot["status"] == "running", snapshot
        child = snapshot["children"][0]
        assert (child["attempt"], child["status"]) == (2, "running"), child

        stopped = await result_of(server, "stop", {"runId": run_id, "graceMs": 1000})
        assert stopped["status"] == "cancelled", stopped
        assert stopped["children"][0]["attempt"] == 2, stopped
        await server.finish()
