"""Start the installed `subagent-host` as a real subprocess and talk to it over stdio.

The reader here is written independently of `subagent_host.rpc.framing`, so an
end-to-end test does not check the server's parser with itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import psutil

from subagent_host.backends import cgroups, lifeline
from subagent_host.openrpc.check import MessageChecker
from tests.waits import still_running

# Generous bounds: tests assert behaviour, never speed.
REPLY_TIMEOUT_S: Final = 20.0
EXIT_TIMEOUT_S: Final = 20.0

FramingName = Literal["ndjson", "lsp"]
SCHEMA: Final = Path(__file__).resolve().parents[2] / "schema" / "openrpc.json"


@functools.cache
def schema_document() -> dict[str, Any]:
    """The committed OpenRPC document (tests/test_schema.py proves it is the code's)."""
    document: dict[str, Any] = json.loads(SCHEMA.read_text())
    return document


def message_checker() -> MessageChecker:
    """A checker for one connection: results closed, so a key the schema lacks fails too."""
    return MessageChecker(schema_document(), closed=True)


def assert_conforming(sent: Sequence[Any], received: Sequence[Any]) -> None:
    """Every message received (replies to `sent`, notifications) matches the schema."""
    checker = message_checker()
    for message in sent:
        checker.sent(message)
    for message in received:
        checker.check(message)


def server_executable() -> str:
    """The console script installed next to this interpreter (the venv's), else on PATH."""
    beside = Path(sys.executable).parent / "subagent-host"
    if beside.exists():
        return str(beside)
    found = shutil.which("subagent-host")
    assert found, "subagent-host is not installed: pip install -e '.[test]'"
    return found


def frame(body: bytes, framing: FramingName) -> bytes:
    if framing == "ndjson":
        return body + b"\n"
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


class ServerProcess:
    """One running server; messages in and out in one framing."""

    def __init__(self, proc: asyncio.subprocess.Process, framing: FramingName) -> None:
        self.proc = proc
        self.framing = framing
        self.stderr = bytearray()
        assert proc.stderr is not None
        self._stdin_pipe = proc.stdin  # None when the test gave the server a file or terminal
        self._stdout_pipe = proc.stdout
        self._stderr_task = asyncio.create_task(self._drain_stderr(proc.stderr))
        self._next_id = 1000
        self.run_ids: set[str] = set()  # every run this server told us about
        # Every message received is checked against schema/openrpc.json.
        self.checker = message_checker()

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.stderr += chunk

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def _stdin(self) -> asyncio.StreamWriter:
        assert self._stdin_pipe is not None, "stdin is not a pipe in this test"
        return self._stdin_pipe

    @property
    def _stdout(self) -> asyncio.StreamReader:
        assert self._stdout_pipe is not None, "stdout is not a pipe in this test"
        return self._stdout_pipe

    async def send_raw(self, data: bytes) -> None:
        if self.framing == "ndjson":  # so that replies to raw requests are checked too
            for line in data.splitlines():
                with contextlib.suppress(ValueError, RecursionError):  # input may be bad
                    self.checker.sent(json.loads(line))
        self._stdin.write(data)
        await asyncio.wait_for(self._stdin.drain(), REPLY_TIMEOUT_S)

    async def send(self, message: Any) -> None:
        self.checker.sent(message)
        await self.send_raw(frame(json.dumps(message).encode(), self.framing))

    async def receive(self) -> Any:
        """The next message the server sends; fails if none arrives in time."""
        message = json.loads(await asyncio.wait_for(self._read_body(), REPLY_TIMEOUT_S))
        assert nulls_in(message) == [], message  # absent fields are omitted (protocol.md §12)
        self.run_ids.update(_run_ids_in(message))
        self.checker.check(message)
        for snapshot in _snapshots_in(message):
            assert_snapshot_table(snapshot)
        return message

    async def _read_body(self) -> bytes:
        if self.framing == "ndjson":
            line = await self._stdout.readline()
            if not line:
                raise EOFError("server closed stdout")
            assert line.endswith(b"\n"), line
            return line
        length = None
        while True:
            header = await self._stdout.readline()
            if not header:
                raise EOFError("server closed stdout")
            if header == b"\r\n":
                break
            name, _, value = header.decode("ascii").partition(":")
            assert header.endswith(b"\r\n") and name.lower() == "content-length", header
            length = int(value.strip())
        assert length is not None
        return await self._stdout.readexactly(length)

    async def request(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        """Send one request and return the reply (which must carry its id)."""
        if msg_id is None:
            self._next_id += 1
            msg_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        reply = await self.receive()
        assert reply.get("id") == msg_id, reply
        return reply

    async def close_stdin(self) -> None:
        self._stdin.close()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await self._stdin.wait_closed()

    async def finish(self) -> tuple[int, list[Any]]:
        """Close stdin, read every remaining message, and wait for the exit status."""
        await self.close_stdin()
        return await self.until_exit()

    async def until_exit(self) -> tuple[int, list[Any]]:
        """Read every remaining message and wait for the exit status, stdin left as it is
        (open, for a server that must end on a message alone: LSP's `exit`)."""
        rest: list[Any] = []
        while True:
            try:
                rest.append(await self.receive())
            except EOFError:
                break
        code = await asyncio.wait_for(self.proc.wait(), EXIT_TIMEOUT_S)
        await asyncio.wait_for(self._stderr_task, EXIT_TIMEOUT_S)
        return code, rest

    def signal(self, signum: signal.Signals) -> None:
        self.proc.send_signal(signum)

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def state_args(state_dir: Path, session: str = "s1", *extra: str) -> tuple[str, ...]:
    """Server arguments for a test's own state directory and session."""
    return ("--state-dir", str(state_dir), "--session", session, *extra)


async def reply_to(server: ServerProcess, method: str, params: Any) -> dict[str, Any]:
    """Send a request and return its reply, skipping the notifications before it."""
    server._next_id += 1
    msg_id = server._next_id
    await server.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:
            message: dict[str, Any] = await server.receive()
            if message.get("id") == msg_id:
                return message


async def result_of(server: ServerProcess, method: str, params: Any) -> dict[str, Any]:
    """The result of a request that must succeed."""
    reply = await reply_to(server, method, params)
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


async def error_of(server: ServerProcess, method: str, params: Any) -> dict[str, Any]:
    """The error of a request that must fail."""
    reply = await reply_to(server, method, params)
    assert "error" in reply, reply
    error: dict[str, Any] = reply["error"]
    return error


@contextlib.asynccontextmanager
async def running_server(
    *args: str, framing: FramingName = "ndjson", program: Sequence[str] = (), **kwargs: Any
) -> AsyncIterator[ServerProcess]:
    """Start a server, yield it, and prove afterwards that it exited and left nothing behind.

    `program` replaces the installed executable (a script wrapping the server).
    """
    proc = await asyncio.create_subprocess_exec(
        *(program or (server_executable(),)),
        *args,
        stdin=kwargs.pop("stdin", asyncio.subprocess.PIPE),
        stdout=kwargs.pop("stdout", asyncio.subprocess.PIPE),
        stderr=asyncio.subprocess.PIPE,
        limit=64 * 1024 * 1024,  # replies can be large; readline must not give up
        **kwargs,
    )
    server = ServerProcess(proc, framing)
    started_at = cgroups.start_ticks(proc.pid)  # with the pid, names its instance cgroup
    try:
        yield server
    finally:
        if proc.returncode is None:
            if server._stdin_pipe is not None:
                server._stdin_pipe.close()
            try:
                await asyncio.wait_for(proc.wait(), EXIT_TIMEOUT_S)
            except TimeoutError:
                proc.kill()  # by pid: the one process this test started
                await proc.wait()
        await asyncio.wait_for(server._stderr_task, EXIT_TIMEOUT_S)
        assert_nothing_left(proc.pid)
        await assert_no_guardian_left(proc.pid)
        assert_no_run_survives(server.run_ids)
        if not program and proc.returncode != -signal.SIGKILL:
            # A server that was not SIGKILLed removes its cgroups as it exits.
            assert_no_instance_cgroup(proc.pid, started_at)
    assert "Traceback" not in server.stderr_text, server.stderr_text


def nulls_in(message: Any) -> list[str]:
    """Where a message holds a null, as `.a.b[2].c` paths. Two are JSON-RPC's and LSP's
    own: the `id` of an error answering a message whose id could not be read, and the
    null `result` of `shutdown` (the schema check refuses a null result of any other
    method)."""
    if isinstance(message, list):  # a batch's answers
        return [path for item in message for path in nulls_in(item)]
    if isinstance(message, dict) and "error" in message and message.get("id", ...) is None:
        message = {key: item for key, item in message.items() if key != "id"}
    if isinstance(message, dict) and "result" in message and message["result"] is None:
        message = {key: item for key, item in message.items() if key != "result"}
    return _null_paths(message, "")


def _null_paths(value: Any, path: str) -> list[str]:
    if value is None:
        return [path or "(the message)"]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _null_paths(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _null_paths(item, f"{path}[{i}]")]
    return []


def _run_ids_in(message: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(message, dict):
        for key, value in message.items():
            if key == "runId" and isinstance(value, str):
                found.add(value)
            else:
                found |= _run_ids_in(value)
    elif isinstance(message, list):
        for item in message:
            found |= _run_ids_in(item)
    return found


TERMINAL: Final = frozenset(
    {"completed", "failed", "cancelled", "timed-out", "limit-reached", "interrupted"}
)


def _snapshots_in(message: Any) -> list[dict[str, Any]]:
    """Every RunSnapshot anywhere in a message (results, error data)."""
    found: list[dict[str, Any]] = []
    if isinstance(message, dict):
        if "runId" in message and "children" in message and "status" in message:
            found.append(message)
        for value in message.values():
            found += _snapshots_in(value)
    elif isinstance(message, list):
        for item in message:
            found += _snapshots_in(item)
    return found


def assert_snapshot_table(snapshot: dict[str, Any]) -> None:
    """protocol.md §12, checked on every snapshot a test sees: what each status must carry."""
    for item in (snapshot, *snapshot["children"]):
        status, output = item["status"], item.get("output")
        if status not in TERMINAL:
            assert status in ("queued", "running"), item
            continue
        assert output is None or output["partial"] is (status != "completed"), item
        if status == "failed":
            assert {"code", "message"} <= item["error"].keys(), item
        if status in ("cancelled", "timed-out", "interrupted"):
            assert item.get("reason"), item
    if snapshot["status"] == "timed-out":
        assert snapshot["reason"] in ("timeout", "stall") and snapshot["enforcedTimeoutMs"] > 0
    if snapshot["status"] == "limit-reached":
        assert snapshot["reachedLimit"]


def marked_processes(run_ids: set[str]) -> list[psutil.Process]:
    """Live (non-zombie) processes anywhere carrying the run marker of one of `run_ids`."""
    found = []
    for process in psutil.process_iter():
        try:
            marker = process.environ().get("SUBAGENT_HOST_RUN_ID")
            if marker in run_ids and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def assert_no_run_survives(run_ids: set[str]) -> None:
    """No live process anywhere carries the marker of a run this server started."""
    if not run_ids:
        return
    left = marked_processes(run_ids)
    for process in left:
        process.kill()  # by pid: processes of runs this test started
    assert left == [], f"processes of runs left behind: {[p.pid for p in left]}"


def assert_no_instance_cgroup(pid: int, started_at: int | None) -> None:
    """The server's own cgroup directory (process tracking, protocol.md §8.3) is gone."""
    hierarchy = cgroups.find_hierarchy()
    if hierarchy is None or started_at is None:
        return
    instance = hierarchy.root / cgroups.instance_name(pid, started_at)
    assert not instance.exists(), f"server {pid} left its cgroups: {instance}"


def guardians_of(server: int) -> list[psutil.Process]:
    """The live guardian processes (backends/guardian.py) of the server process `server`:
    its argv names the server's pid after the lifeline's descriptor."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if lifeline.PROGRAM in cmdline[:5]:
            at = cmdline.index(lifeline.PROGRAM)
            if cmdline[at + 2 : at + 3] == [str(server)]:
                with contextlib.suppress(psutil.Error):
                    if process.status() != psutil.STATUS_ZOMBIE:
                        found.append(process)
    return found


def processes_below(server: int) -> list[psutil.Process]:
    """Every descendant of the server process but its guardian: the processes of its runs
    (and its version probes)."""
    guardians = {process.pid for process in guardians_of(server)}
    below = psutil.Process(server).children(recursive=True)
    return [process for process in below if process.pid not in guardians]


def kill_with_its_guardian(server: ServerProcess) -> None:
    """SIGKILL the server and its guardian together, as if both were killed at once: the
    runs' processes then outlive the server until the next server ends them (protocol.md
    §13). The guardian is stopped first, so it cannot act on the server's death; stopped,
    it still dies of SIGKILL. By pid: the processes of the server this test started."""
    (guardian,) = guardians_of(server.pid)
    guardian.suspend()
    server.signal(signal.SIGKILL)
    guardian.kill()


async def assert_no_guardian_left(server: int) -> None:
    """The server's guardian is gone: at once after a clean exit, within moments after a
    SIGKILL (it ends the runs first); killed (by pid) and failed otherwise. The server is
    gone, so no new guardian of it can start meanwhile."""
    found = await asyncio.to_thread(guardians_of, server)
    await still_running(found, EXIT_TIMEOUT_S)
    left = await asyncio.to_thread(guardians_of, server)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()  # by pid: the guardian of the server this test started
    assert left == [], f"guardians of server {server} left behind: {[p.pid for p in left]}"


def assert_nothing_left(pid: int) -> None:
    """The server is gone (reaped) and no process of ours carries its pid as parent."""
    assert not psutil.pid_exists(pid), f"server {pid} still exists"
    orphans = [
        p.pid for p in psutil.Process(os.getpid()).children(recursive=True) if p.ppid() == pid
    ]
    assert orphans == [], orphans
