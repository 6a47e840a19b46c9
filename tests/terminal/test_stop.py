"""`subagent-host stop`: a run of one server process stopped from another process, through
the server's control socket (protocol.md §10.1)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import psutil
import pytest

from subagent_host.client import Host, InvalidParams, MethodNotFound, RunNotFound
from subagent_host.client.control import connect_control
from subagent_host.rpc.control import MAX_CONNECTIONS
from subagent_host.rpc.control_socket import CONTROL_DIR, reachable
from subagent_host.store.browse import StateBrowser
from subagent_host.values.events import OutputEvent
from tests.e2e.harness import (
    _run_ids_in,
    assert_no_run_survives,
    assert_nothing_left,
    processes_below,
)
from tests.waits import still_running

pytestmark = pytest.mark.e2e

FAKES = Path(__file__).parent.parent / "fakes"
EXIT_S = 30.0


class Seen:
    """Every message the server's client received, and the run ids they named."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.run_ids: set[str] = set()

    def __call__(self, message: Any) -> None:
        self.messages.append(message)
        self.run_ids |= _run_ids_in(message)


class Server:
    """A server process on a state directory, through the client library."""

    def __init__(self, host: Host, state: Path, seen: Seen) -> None:
        self.host = host
        self.state = state
        self.seen = seen

    async def spawn_ready(self, command: tuple[str, ...]) -> str:
        """Start `command` in the background; return its run id once it printed `ready`."""
        snap = await self.host.spawn(command=command, mode="background", stream=True)
        async with asyncio.timeout(EXIT_S):
            async for event in self.host.events(snap.run_id):
                if isinstance(event.event, OutputEvent) and "ready" in event.event.text:
                    return snap.run_id
        raise AssertionError("the run ended before it was ready")

    def tree(self) -> list[psutil.Process]:
        assert self.host.process is not None
        return processes_below(self.host.process.pid)  # its runs', not its guardian


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, name: str = "a", env: Mapping[str, str] | None = None
) -> AsyncIterator[Server]:
    """A server (its own process) on `tmp_path/state`, with `env` added to its environment;
    afterwards it and every process of its runs are gone, and it logged no traceback."""
    state = tmp_path / "state"
    log = tmp_path / f"server-{name}.log"
    seen = Seen()
    environment = {**os.environ, **env} if env is not None else None
    with log.open("ab") as stderr:
        async with Host.start(
            ["--state-dir", str(state)], stderr=stderr, on_message=seen, env=environment
        ) as host:
            server = Server(host, state, seen)
            await host.ping()
            yield server
    assert host.process is not None and host.process.returncode is not None
    assert_nothing_left(host.process.pid)
    assert_no_run_survives(server.seen.run_ids)
    assert "Traceback" not in log.read_text(), log.read_text()


async def stop_command(state: Path, *args: str) -> tuple[int, str, str]:
    """`subagent-host stop ARGS --state-dir STATE` as a process of its own."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "subagent_host",
        "stop",
        *args,
        "--state-dir",
        str(state),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(EXIT_S):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_stop_from_another_process_ends_the_whole_tree_and_the_owner_s_client_sees_it(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as server:
        # sh and its background sleep: a child and a grandchild of the server.
        run_id = await server.spawn_ready(("sh", "-c", "sleep 300 & echo ready; wait"))
        tree = server.tree()
        assert len(tree) >= 2
        directory = server.state / CONTROL_DIR
        (sock,) = directory.iterdir()
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600

        code, out, err = await stop_command(server.state, run_id[:8], "--grace-ms", "2000")

        assert (code, err) == (0, "")
        assert out.startswith(f"run {run_id[:8]} cancelled after ")
        assert "stopped by subagent-host stop" in out and "ended by sigterm" in out
        async with asyncio.timeout(EXIT_S):
            final = await server.host.wait(run_id)
        assert (final.status, final.reason) == ("cancelled", "stopped by subagent-host stop")
        ended = [
            m["params"]
            for m in server.seen.messages
            if m.get("method") == "run/event" and m["params"].get("status") == "cancelled"
        ]
        assert {e["type"] for e in ended} == {"child", "status"}  # the owner heard it end
        assert await still_running(tree, 10) == []


async def test_a_child_ignoring_sigterm_is_killed_after_the_grace_given(tmp_path: Path) -> None:
    async with serving(tmp_path) as server:
        command = (sys.executable, str(FAKES / "tree.py"), "3", "--ignore-term")
        run_id = await server.spawn_ready(command)
        tree = server.tree()

        code, out, _err = await stop_command(server.state, run_id, "--grace-ms", "200")

        assert code == 0
        assert "1 child ended by sigkill" in out
        assert await still_running(tree, 10) == []


async def test_references_that_name_no_run_say_why_in_one_line(tmp_path: Path) -> None:
    async with serving(tmp_path) as server:
        done = await server.host.spawn(command=("true",), mode="task")

        short = await stop_command(server.state, "abc")
        unknown = await stop_command(server.state, "0123456789abcdef")
        ended = await stop_command(server.state, done.run_id[:10])

    assert short[0] == 1
    assert "a run id prefix needs at least 8 characters" in short[2]
    assert short[2].count("\n") == 1
    assert unknown[0] == 1 and "no run '0123456789abcdef'" in unknown[2]
    assert ended == (0, f"run {done.run_id[:8]} had already ended: completed\n", "")


async def test_a_run_whose_server_died_is_not_running_and_the_next_server_ends_it(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as server:
        run_id = await server.spawn_ready(("sh", "-c", "sleep 300 & echo ready; wait"))
        tree = server.tree()
        assert server.host.process is not None
        dead_pid = server.host.process.pid
        server.host.process.kill()  # the server we started, by its pid
        await server.host.process.wait()

        code, _out, err = await stop_command(server.state, run_id)

        assert code == 1
        assert err.startswith(f"subagent-host stop: run {run_id[:8]} is not running: ")
        assert f"the server process {dead_pid} is gone" in err
        assert "marks it interrupted" in err
        # The dead server's socket is left behind; the stop did not trust it.
        (dead,) = (server.state / CONTROL_DIR).iterdir()
        os.utime(dead, (0, 0))  # as if long ago: the next server sweeps only older sockets
        server.seen.run_ids.clear()  # its processes are the next server's to end
    async with serving(tmp_path, "b") as second:
        assert await still_running(tree, EXIT_S) == []
        with StateBrowser.open(second.state) as browser:
            recorded = browser.load(run_id)
        assert recorded is not None and str(recorded.status) == "interrupted"
    # The next server swept the socket the killed one left (and removed its own).
    assert list((tmp_path / "state" / CONTROL_DIR).iterdir()) == []
    assert_no_run_survives({run_id})


async def test_a_socket_a_dead_server_left_is_removed_by_the_next_server(tmp_path: Path) -> None:
    directory = tmp_path / "state" / CONTROL_DIR
    directory.mkdir(parents=True, mode=0o700)
    stale = directory / ("0" * 32 + ".sock")
    left = socket.socket(socket.AF_UNIX)
    with reachable(stale) as name:
        left.bind(name)
    left.close()
    os.utime(stale, (0, 0))  # left long ago
    async with serving(tmp_path) as server:
        (ours,) = [p for p in (server.state / CONTROL_DIR).iterdir() if p != stale]
        assert ours.is_socket()
    assert list(directory.iterdir()) == []  # swept while it served; its own removed at exit


async def test_the_control_socket_answers_ping_status_stop_and_the_live_run_methods_only(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as server:
        run_id = await server.spawn_ready(("sh", "-c", "echo ready; exec sleep 300"))
        assert server.host.process is not None
        (path,) = (server.state / CONTROL_DIR).iterdir()
        async with await connect_control(path, pid=server.host.process.pid) as control:
            pong = await control.ping()
            assert pong.methods == (
                "ping",
                "run/close",
                "run/interrupt",
                "run/permit",
                "run/send",
                "status",
                "stop",
            )
            with pytest.raises(InvalidParams):
                await control.request("ping", {"sessionId": "session-other"})
            assert (await control.status(run_id)).status == "running"
            with pytest.raises(RunNotFound) as unknown:
                await control.status("0" * 32)
            assert unknown.value.data["reason"] == "not-held-here"
            with pytest.raises(MethodNotFound):
                await control.request("spawn", {"command": ["true"]})
            stopped = await control.stop(run_id=run_id, grace_ms=1000)
            assert stopped.status == "cancelled" and stopped.already_terminal is False


async def _raw_connection(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    with reachable(path) as name:
        return await asyncio.open_unix_connection(name)


async def _held_connection(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection to the control socket, answered once (so the server holds it)."""
    reader, writer = await _raw_connection(path)
    writer.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    async with asyncio.timeout(EXIT_S):
        assert b'"result"' in await reader.readline()
    return reader, writer


async def test_a_server_holding_its_most_control_connections_says_it_is_busy(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as server:
        run_id = await server.spawn_ready(("sh", "-c", "echo ready; exec sleep 300"))
        (path,) = (server.state / CONTROL_DIR).iterdir()
        held = [await _held_connection(path) for _ in range(MAX_CONNECTIONS)]

        # One more is told why in one line about no request, then closed.
        reader, writer = await _raw_connection(path)
        async with asyncio.timeout(EXIT_S):
            line = await reader.readline()
            assert await reader.read() == b""
        writer.close()
        error = json.loads(line)["error"]
        assert json.loads(line)["id"] is None
        assert error["code"] == -32005
        assert error["data"] == {"connections": MAX_CONNECTIONS, "limit": MAX_CONNECTIONS}

        code, out, err = await stop_command(server.state, run_id)

        assert (code, out) == (3, "")
        assert "went away" not in err
        assert f"is busy (busy: {MAX_CONNECTIONS} control connections are open" in err
        assert err.count("\n") == 1
        assert (await server.host.status(run_id)).status == "running"

        for _reader, held_writer in held:
            held_writer.close()
            await held_writer.wait_closed()
        # The server sees them end on its own time: the command is tried until it is
        # no longer told "busy" (a bounded number of times).
        for _attempt in range(20):
            code, out, err = await stop_command(server.state, run_id)
            if code != 3:
                break
        assert (code, err) == (0, "")
        assert out.startswith(f"run {run_id[:8]} cancelled after ")
