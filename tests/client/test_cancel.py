"""A cancelled call: `$/cancelRequest` reaches the server, and the call raises CancelledError."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.client.conftest import Seen, first_run_id, started


async def test_a_cancelled_task_spawn_sends_cancel_request_and_its_run_is_stopped(
    tmp_path: Path, framing: str
) -> None:
    seen = Seen()
    async with started(tmp_path, framing, seen=seen) as (host, _seen):
        waiting = asyncio.create_task(host.spawn(command=("sleep", "30"), mode="task"))
        run_id = await first_run_id(seen)
        answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def look(message: Any) -> None:
            if isinstance(message, dict) and message.get("id") == 1 and not answered.done():
                answered.set_result(message)

        seen.also = look
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        # The server's answer to the cancelled request: -32800 with the stopped run.
        async with asyncio.timeout(20):
            reply = await answered
        assert reply["error"]["code"] == -32800
        assert reply["error"]["data"]["runId"] == run_id
        final = await host.wait(run_id)
        assert final.status == "cancelled"
        assert (await host.ping()).pong  # the late answer disturbed nothing


async def test_a_call_cancelled_before_its_answer_leaves_other_calls_answered(
    tmp_path: Path,
) -> None:
    async with started(tmp_path) as (host, seen):
        slow = asyncio.create_task(host.spawn(command=("sleep", "30"), mode="task"))
        run_id = await first_run_id(seen)
        quick = await host.status(run_id)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert quick.run_id == run_id
        assert (await host.wait(run_id)).status == "cancelled"
