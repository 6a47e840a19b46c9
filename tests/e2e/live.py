"""Talking to interactive children through a real server (protocol.md §23): a client
that keeps every `run/event` it reads while it waits for its replies, so a test can
await the event it expects and still look back at all of them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final

import psutil

from tests.e2e.agents import POLL_INTERVAL_S
from tests.e2e.harness import EXIT_TIMEOUT_S, ServerProcess, marked_processes

Event = dict[str, Any]

TURN_END: Final = {"type": "turn", "phase": "end"}


def matches(event: Event, wanted: dict[str, Any]) -> bool:
    return all(event.get(key) == value for key, value in wanted.items())


class LiveClient:
    """One server's messages: replies by id, events in the order they came."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.events: list[Event] = []
        self._replies: dict[int, dict[str, Any]] = {}
        self._cursor = 0  # `next` looks for events from here on

    async def _read(self) -> None:
        message = await self.server.receive()
        if message.get("method") == "run/event":
            self.events.append(message["params"])
        elif "id" in message:
            self._replies[message["id"]] = message

    async def reply(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and return its reply (the events before it are kept)."""
        self.server._next_id += 1
        msg_id = self.server._next_id
        await self.server.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while msg_id not in self._replies:
                await self._read()
        return self._replies.pop(msg_id)

    async def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        reply = await self.reply(method, params)
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    async def error(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        reply = await self.reply(method, params)
        assert "error" in reply, reply
        error: dict[str, Any] = reply["error"]
        return error

    async def next(self, run_id: str, **wanted: Any) -> Event:
        """The first event of `run_id` matching `wanted` after the last one `next`
        returned (its fields, snake-free: `type`, `phase`, `stopReason`...)."""
        return await self.first(lambda e: e.get("runId") == run_id and matches(e, wanted))

    def skip(self) -> None:
        """`next` and `first` look only at the events that come from now on."""
        self._cursor = len(self.events)

    async def first(self, test: Callable[[Event], bool]) -> Event:
        async with asyncio.timeout(EXIT_TIMEOUT_S * 3):  # a model turn of a real CLI
            while True:
                for at in range(self._cursor, len(self.events)):
                    if test(self.events[at]):
                        self._cursor = at + 1
                        return self.events[at]
                self._cursor = len(self.events)
                await self._read()

    async def turn_ended(self, run_id: str) -> Event:
        return await self.next(run_id, **TURN_END)

    def of(self, run_id: str, kind: str, **wanted: Any) -> list[Event]:
        """Every event of that type of `run_id` so far."""
        return [
            e
            for e in self.events
            if e.get("runId") == run_id and e["type"] == kind and matches(e, wanted)
        ]

    def text_since(self, run_id: str, start: int) -> str:
        """The assistant's `message` text of `run_id` among the events from `start` on."""
        return "".join(
            e.get("text", "")
            for e in self.events[start:]
            if e.get("runId") == run_id and e["type"] == "message"
        )


async def tool_process(run_id: str, name: str) -> psutil.Process:
    """The process called `name` that a tool of run `run_id` runs, once it runs."""
    async with asyncio.timeout(EXIT_TIMEOUT_S * 3):
        while True:  # the process table changes without telling anyone: poll it, bounded
            found = await asyncio.to_thread(marked_processes, {run_id})
            named = [p for p in found if _name(p) == name]
            if named:
                return named[0]
            await asyncio.sleep(POLL_INTERVAL_S)


def _name(process: psutil.Process) -> str | None:
    try:
        return process.name()
    except psutil.Error:
        return None


async def gone(process: psutil.Process) -> bool:
    """Whether `process` ends within the bound (a zombie is gone: nothing of it runs)."""

    def ended() -> bool:
        _, alive = psutil.wait_procs([process], timeout=EXIT_TIMEOUT_S)
        return not alive

    return await asyncio.to_thread(ended)


def option_of(asked: Event, kind: str) -> str:
    """The id of the first option of that kind a `permission` event offers."""
    return str(next(o["optionId"] for o in asked["options"] if o["kind"] == kind))
