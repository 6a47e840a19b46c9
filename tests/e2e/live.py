"""Talking to interactive children through a real server (protocol.md §23): a client
that keeps every `run/event` it reads while it waits for its replies, so a test can
await the event it expects and still look back at all of them."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import psutil

from tests.backends.fixtures.record_claude_stream import WRITE_COMMAND, WRITTEN
from tests.e2e.agents import POLL_INTERVAL_S, server_args
from tests.e2e.harness import EXIT_TIMEOUT_S, ServerProcess, marked_processes, running_server
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_REPORT_TOOL, MockLLM

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

    async def reply(
        self, method: str, params: dict[str, Any], timeout_s: float = EXIT_TIMEOUT_S
    ) -> dict[str, Any]:
        """Send a request and return its reply (the events before it are kept), waited
        for `timeout_s` at most."""
        self.server._next_id += 1
        msg_id = self.server._next_id
        await self.server.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        async with asyncio.timeout(timeout_s):
            while msg_id not in self._replies:
                await self._read()
        return self._replies.pop(msg_id)

    async def result(
        self, method: str, params: dict[str, Any], timeout_s: float = EXIT_TIMEOUT_S
    ) -> dict[str, Any]:
        reply = await self.reply(method, params, timeout_s)
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
        returned (its fields as on the wire: `type`, `phase`, `stopReason`...)."""
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

    async def answer(self, run_id: str) -> str:
        """The assistant's `message` text of `run_id` up to the next turn's end, among the
        events `next` has not passed yet; the turn must end `end_turn`."""
        start = self._cursor
        ended = await self.turn_ended(run_id)
        assert ended["stopReason"] == "end_turn", ended
        return "".join(
            e.get("text", "")
            for e in self.events[start : self._cursor]
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
    """Whether `process` ends (and is reaped by its parent) within the bound."""

    def ended() -> bool:
        _, alive = psutil.wait_procs([process], timeout=EXIT_TIMEOUT_S)
        return not alive

    return await asyncio.to_thread(ended)


async def interrupted_mid_tool(client: LiveClient, run_id: str, text: str) -> None:
    """Send `text` (the mock's SLEEP-TOOL: a long tool), interrupt the turn once its
    process runs: the turn ends `interrupted`, and the process too (the CLI ended it, or
    the server did, when the CLI leaves it running)."""
    assert (await client.result("run/send", {"runId": run_id, "text": text}))[
        "state"
    ] == "delivered"
    await client.next(run_id, type="tool", phase="start")
    sleep = await tool_process(run_id, "sleep")
    assert (await client.result("run/interrupt", {"runId": run_id}))["interrupted"]
    assert (await client.turn_ended(run_id))["stopReason"] == "interrupted"
    assert await gone(sleep)


def option_of(asked: Event, kind: str) -> str:
    """The id of the first option of that kind a `permission` event offers."""
    return str(next(o["optionId"] for o in asked["options"] if o["kind"] == kind))


async def permit(client: LiveClient, asked: Event, kind: str) -> None:
    """Answer the permission `asked` with its first option of that kind."""
    params = {"runId": asked["runId"], "permissionId": asked["permissionId"]}
    await client.result("run/permit", {**params, "optionId": option_of(asked, kind)})


def there(path: Path, *, remove: bool = False) -> bool:
    """Whether the file the model's tool writes exists (removed, with `remove`): a
    local file's stat, not worth a thread."""
    found = path.exists()
    if remove:
        path.unlink()
    return found


async def allowed_then_rejected(
    client: LiveClient, spawn: dict[str, Any], written: Path
) -> tuple[Event, str]:
    """Spawn `spawn` (`approvals: "client"`, a model whose tool writes `written`): its ask
    is pending until allowed, and the file is then written; a next message's ask is
    rejected, and it is not. The first ask and the closed child's final text."""
    run_id = (await client.result("spawn", spawn))["runId"]
    asked = await client.next(run_id, type="permission", stage="asked")
    status = await client.result("status", {"runId": run_id})
    assert [p["permissionId"] for p in status["pendingPermissions"]] == [asked["permissionId"]]
    assert not there(written)  # it waits for the answer
    await permit(client, asked, "allow-once")
    assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
    assert there(written)
    there(written, remove=True)
    again = {"runId": run_id, "text": f"{spawn['prompt']} again"}
    assert (await client.result("run/send", again))["state"] == "delivered"
    await permit(client, await client.next(run_id, type="permission", stage="asked"), "reject-once")
    assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
    assert not there(written)
    closed = await client.result("run/close", {"runId": run_id})
    assert "pendingPermissions" not in closed
    return asked, str(closed["children"][0]["output"]["text"])


async def rejected_by_policy(
    client: LiveClient, spawn: dict[str, Any], written: Path
) -> tuple[Event, str]:
    """Spawn `spawn` with `approvals: "policy"` and read access (a model whose tool writes
    `written`): the server rejects the write itself, nothing waits for a client, and the
    file is not written. The answer and the closed child's final text."""
    policy = {**spawn, "approvals": "policy", "access": {"filesystem": "read"}}
    run_id = (await client.result("spawn", policy))["runId"]
    answered = await client.next(run_id, type="permission", stage="answered")
    assert answered["answeredBy"] == "policy"
    assert (await client.turn_ended(run_id))["stopReason"] == "end_turn"
    assert "pendingPermissions" not in await client.result("status", {"runId": run_id})
    assert not there(written)
    closed = await client.result("run/close", {"runId": run_id})
    return answered, str(closed["children"][0]["output"]["text"])


@dataclasses.dataclass(frozen=True)
class Approvals:
    """What `asked_both_ways` saw: the client's first ask and the final text after the
    rejected one; the policy's answer and the final text after it."""

    asked: Event
    after_rejected: str
    answered: Event
    after_policy: str


async def asked_both_ways(
    tmp_path: Path, environment: Callable[[Path, MockLLM], dict[str, str]], spawn: dict[str, Any]
) -> Approvals:
    """On a server whose CLIs `environment` points at a mock whose tool writes a file:
    `spawn` under `approvals: "client"` (`allowed_then_rejected`), then under `policy`
    with read access (`rejected_by_policy`), each told to report its tool's result."""
    work = tmp_path / "work"
    work.mkdir()
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with running_server(
            *server_args(tmp_path), env=environment(tmp_path, mock)
        ) as server:
            client = LiveClient(server)
            spawn = {**spawn, "cwd": str(work), "prompt": f"{KEYWORD_REPORT_TOOL} write it"}
            asking = {**spawn, "approvals": "client"}
            asked, after_rejected = await allowed_then_rejected(client, asking, work / WRITTEN)
            answered, after_policy = await rejected_by_policy(client, spawn, work / WRITTEN)
            await server.finish()
    return Approvals(asked, after_rejected, answered, after_policy)


async def resumed(client: LiveClient, run_id: str, mock: MockLLM) -> Event:
    """Resume the finished interactive `run_id`, whose first message said
    REMEMBERED: its new turn's request to the model carries that message too (its
    session was continued), and its turn ends with the child waiting for input. The
    `turn` end."""
    resume = {"runId": run_id, "message": f"{KEYWORD_ANSWER_NOW} REPEAT:second"}
    token = (await client.result("preflight", {"resume": resume}))["token"]
    await client.result("resume", {"token": token})
    ended = await client.turn_ended(run_id)
    assert ended["stopReason"] == "end_turn"
    (request,) = mock.requests_containing("REPEAT:second")
    assert REMEMBERED in request.raw_body  # the first attempt's message
    return ended


REMEMBERED: Final = f"{KEYWORD_ANSWER_NOW} remember PAPAYA7"
"""A first message a resumed child's model is told again."""
