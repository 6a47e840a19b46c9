"""The real server behind a proxy that breaks one thing of the protocol, for the
conformance harness's own tests: each flag is a bug the harness must catch.

Usage: broken_server.py FLAG SERVER-ARGS...   (NDJSON framing only)

  --answer-notifications   answer every notification with {"id": null, "result": null}
  --seq-gap                number run/event seqs 1, 2, 4, 5...: a gap after 2 (also in
                           `status` replies, so the history agrees with the notifications)
  --fake-stop              answer `stop` itself with a `cancelled` snapshot, never
                           forwarding it: the run's processes stay alive
  --lossy-ids              echo ids the way a careless client library would: a string of
                           digits as a number, an integer beyond 2**53 rounded to a double
  --stderr-as-output       send a child's streamed stderr as `output` events, as a server
                           would that mixed it into its stdout
  --tool-kind-other        send every `tool` event's kind as `other`, as a server would
                           that did not pass an ACP agent's tool kinds through
  --ignore-access          drop `access` from every `spawn` (not from `preflight`), as a
                           server would that launched a child with full access whatever
                           its request asked

Input is forwarded line by line, unchanged unless the flag acts on it; output lines
are re-encoded only when the flag changed them.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import Any

SERVER = (sys.executable, "-m", "subagent_host")
TERMINAL = {"completed", "failed", "cancelled", "timed-out", "limit-reached", "interrupted"}


class Proxy:
    def __init__(self, flag: str, server: asyncio.subprocess.Process) -> None:
        self.flag = flag
        self.server = server
        self.out = sys.stdout.buffer
        self.pending_stops: dict[str, tuple[Any, dict[str, Any]]] = {}
        self.next_own_id = 0

    def to_client(self, message: Any) -> None:
        self.out.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        self.out.flush()

    def to_server(self, line: bytes) -> None:
        assert self.server.stdin is not None
        self.server.stdin.write(line)

    async def pump_input(self) -> None:
        reader = asyncio.StreamReader(limit=1 << 30)
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            self.from_client(line)
            assert self.server.stdin is not None
            await self.server.stdin.drain()
        assert self.server.stdin is not None
        self.server.stdin.close()

    def from_client(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self.to_server(line)
            return
        if self.flag == "--answer-notifications" and "method" in message and "id" not in message:
            self.to_server(line)
            self.to_client({"jsonrpc": "2.0", "id": None, "result": None})
            return
        if self.flag == "--fake-stop" and message.get("method") == "stop" and "id" in message:
            params = message.get("params") or {}
            self.next_own_id += 1
            own = f"proxy-{self.next_own_id}"
            self.pending_stops[own] = (message["id"], params)
            status = {"runId": params.get("runId")}
            self.to_server(
                self.encode({"jsonrpc": "2.0", "id": own, "method": "status", "params": status})
            )
            return
        if self.flag == "--ignore-access" and message.get("method") == "spawn":
            (message.get("params") or {}).pop("access", None)
            self.to_server(self.encode(message))
            return
        self.to_server(line)

    @staticmethod
    def encode(message: Any) -> bytes:
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"

    async def pump_output(self) -> None:
        assert self.server.stdout is not None
        while line := await self.server.stdout.readline():
            try:
                message = json.loads(line)
            except ValueError:
                self.out.write(line)
                self.out.flush()
                continue
            changed = self.from_server(message)
            if changed is None:
                continue
            self.to_client(changed)

    def from_server(self, message: Any) -> Any:
        if not isinstance(message, dict):
            return message
        if self.flag == "--seq-gap":
            renumber(message)
        elif self.flag == "--stderr-as-output" and message.get("method") == "run/event":
            if message["params"].get("type") == "stderr":
                message["params"]["type"] = "output"
        elif self.flag == "--tool-kind-other" and message.get("method") == "run/event":
            if message["params"].get("type") == "tool":
                message["params"]["kind"] = "other"
        elif self.flag == "--lossy-ids" and "method" not in message:
            message["id"] = lossy(message.get("id"))
        elif self.flag == "--fake-stop" and message.get("id") in self.pending_stops:
            client_id, params = self.pending_stops.pop(message["id"])
            return fake_stop(client_id, params, message)
        return message


def renumber(value: Any) -> None:
    """Every seq above 2 one higher: a gap between 2 and 4."""
    if isinstance(value, dict):
        for key in ("seq", "lastSeq", "firstRetainedSeq"):
            if isinstance(value.get(key), int) and value[key] > 2:
                value[key] += 1
        for item in value.values():
            renumber(item)
    elif isinstance(value, list):
        for item in value:
            renumber(item)


def lossy(msg_id: Any) -> Any:
    if isinstance(msg_id, str) and msg_id.isdigit():
        return int(msg_id)
    if isinstance(msg_id, int) and not isinstance(msg_id, bool) and abs(msg_id) > 2**53:
        return int(float(msg_id))
    return msg_id


def fake_stop(client_id: Any, params: dict[str, Any], status_reply: dict[str, Any]) -> Any:
    """The answer a correct stop would give, made up without stopping anything."""
    if "result" not in status_reply:
        return {**status_reply, "id": client_id}
    snapshot = dict(status_reply["result"])
    if snapshot["status"] in TERMINAL:
        return {"jsonrpc": "2.0", "id": client_id, "result": {**snapshot, "alreadyTerminal": True}}
    reason = params.get("reason", "stopped by the client")
    snapshot.update(status="cancelled", reason=reason, alreadyTerminal=False)
    snapshot["children"] = [
        {**child, "status": "cancelled", "reason": reason} for child in snapshot["children"]
    ]
    return {"jsonrpc": "2.0", "id": client_id, "result": snapshot}


async def main() -> int:
    flag, args = sys.argv[1], sys.argv[2:]
    server = await asyncio.create_subprocess_exec(
        *SERVER,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 30,
    )
    proxy = Proxy(flag, server)
    # The harness signals the process it started (this one): the server must get it.
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, server.send_signal, signum)
    reading = asyncio.create_task(proxy.pump_input())
    await proxy.pump_output()
    reading.cancel()
    return await server.wait()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
