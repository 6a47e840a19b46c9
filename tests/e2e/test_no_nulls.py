"""Absent fields are omitted, never `null`: every reply and notification of a session that
uses every method (protocol.md §12). The one `null` JSON-RPC itself asks for is the `id`
of an error answering a message whose id could not be read. (The harness checks every
message of every end-to-end test too; this session makes sure each kind is seen.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagent_host.planning.fingerprint import fingerprint
from tests.e2e.harness import ServerProcess, nulls_in, running_server, state_args

FAILS: list[str] = ["sh", "-c", "cat; echo oops >&2; exit 3"]


class Session:
    """Every message the server sends, each checked for nulls as it arrives."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.seen: list[Any] = []
        self._next = 0

    async def call(self, method: str, params: Any = None) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next, "method": method}
        if params is not None:
            message["params"] = params
        await self.server.send(message)
        while True:
            received = await self.server.receive()
            self.seen.append(received)
            if isinstance(received, dict) and received.get("id") == self._next:
                return received

    async def raw(self, text: bytes) -> Any:
        await self.server.send_raw(text + b"\n")
        received = await self.server.receive()
        self.seen.append(received)
        return received


async def test_no_reply_or_notification_of_a_whole_session_holds_a_null(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path)) as server:
        session = Session(server)
        await session.call("initialize", {"clientInfo": {"name": "t"}})
        await session.call("ping")
        await session.call("agents/list")
        await session.call(
            "preflight", {"tasks": [{"command": ["true"]}, {"command": ["echo", "x"]}]}
        )
        await session.call("preflight", {"command": ["true"], "access": {"network": False}})
        done = await session.call(
            "spawn",
            {"command": ["echo", "hi"], "mode": "task", "stream": True, "label": "greeting",
             "workDoneToken": "tok-1"},
        )  # fmt: skip
        assert done["result"]["status"] == "completed"
        failed = await session.call("spawn", {"command": FAILS, "prompt": "in", "mode": "task"})
        assert failed["result"]["status"] == "failed"
        chain = await session.call(
            "spawn", {"chain": [{"command": FAILS}, {"command": ["true"]}], "mode": "task"}
        )
        assert chain["result"]["children"][1]["status"] == "cancelled"
        sleeping = await session.call("spawn", {"command": ["sleep", "300"]})
        await session.call("stop", {"runId": sleeping["result"]["runId"], "graceMs": 200})
        await session.call("status", {"runId": failed["result"]["runId"], "since": 0})
        await session.call("status", {})
        approval = await session.call(
            "preflight", {"resume": {"runId": failed["result"]["runId"], "message": "again"}}
        )
        contract = approval["result"]["contract"]
        assert {"model", "thinking", "label", "agent", "access"}.isdisjoint(contract["projection"])
        # The digest is the one the stored form (nulls and all) gives: canonical JSON omits them.
        assert approval["result"]["contractDigest"] == fingerprint(contract)
        resumed = await session.call(
            "resume", {"token": approval["result"]["token"], "mode": "task"}
        )
        assert resumed["result"]["children"][0]["attempt"] == 2
        for method, params in [
            ("ping", {"colour": 1}),
            ("stop", {"runId": "0123456789abcdef"}),
            ("resume", {"token": "nope"}),
            ("no/such", {}),
        ]:
            assert "error" in await session.call(method, params)
        await session.raw(b'[{"jsonrpc":"2.0","id":"b","method":"ping"},1]')
        await session.raw(b'{"jsonrpc":"2.0","id":1,')
        _, rest = await server.finish()
        session.seen += rest
    methods = {m.get("method") for m in session.seen if isinstance(m, dict)}
    assert {"run/event", "$/progress"} <= methods
    found = [(message, nulls_in(message)) for message in session.seen if nulls_in(message)]
    assert found == []
