"""Starting, connecting and closing: a server the client started is never left behind."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from subagent_host.client import Host, HostConnectionError, InvalidRequest
from subagent_host.client import host as client_host
from subagent_host.server_process import server_command, start_server_process
from tests.client.conftest import Seen, started
from tests.e2e.harness import assert_no_run_survives, assert_nothing_left, server_executable


async def test_closing_ends_the_server_and_the_runs_it_still_had(tmp_path: Path) -> None:
    async with started(tmp_path) as (host, seen):
        run = await host.spawn(command=("sleep", "30"))
    # `started` proved the server exited and no process of the run survives.
    assert run.run_id in seen.run_ids


async def test_shutdown_then_exit_ends_the_server_with_status_0_and_its_runs(
    tmp_path: Path, framing: str
) -> None:
    async with started(tmp_path, framing) as (host, seen):
        run = await host.spawn(command=("sleep", "30"))
        await host.shutdown()
        with pytest.raises(InvalidRequest, match="the server is shut down"):
            await host.ping()
        await host.exit()
        assert host.process is not None
        async with asyncio.timeout(20):  # stdin still open: exit alone ends it
            assert await host.process.wait() == 0
    assert run.run_id in seen.run_ids  # `started` proved no process of it survives


async def test_exit_without_shutdown_ends_the_server_with_status_1(tmp_path: Path) -> None:
    async with started(tmp_path) as (host, _seen):
        assert (await host.ping()).pong
        await host.exit()
        assert host.process is not None
        async with asyncio.timeout(20):
            assert await host.process.wait() == 1


async def test_connect_speaks_over_streams_the_caller_has(tmp_path: Path, framing: str) -> None:
    process = await asyncio.create_subprocess_exec(
        server_executable(),
        "--state-dir",
        str(tmp_path / "state"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    seen = Seen()
    try:
        async with Host.connect(
            process.stdout, process.stdin, framing=framing, on_message=seen
        ) as host:
            assert (await host.ping()).pong
            snap = await host.spawn(command=("echo", "over", "streams"), mode="task")
            assert snap.output is not None and snap.output.text == "over streams\n"
        # Closing the client closed the server's stdin: it exits on its own.
        async with asyncio.timeout(20):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()  # by pid: the server this test started
            await process.wait()
    assert_nothing_left(process.pid)
    assert_no_run_survives(seen.run_ids)


@pytest.mark.parametrize("how", ["started", "adopted"])
async def test_a_server_that_ignores_its_end_of_input_and_sigterm_is_killed(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.setattr(client_host, "EXIT_WAIT_S", 0.2)
    monkeypatch.setattr(client_host, "TERMINATE_WAIT_S", 0.2)
    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)"
    program = (sys.executable, "-c", stubborn)
    if how == "started":
        host = await Host.start(program=program)
    else:  # started first, adopted after: ended the same way
        host = Host.adopt(await start_server_process(program))
    assert host.process is not None
    await host.aclose()
    assert host.process.returncode == -9
    assert_nothing_left(host.process.pid)


async def test_an_adopted_server_is_spoken_to_and_ended_as_a_started_one(tmp_path: Path) -> None:
    # Started first (as `run` and `mcp` do, to import the rest meanwhile), adopted after.
    command = server_command(["--state-dir", str(tmp_path / "state")])
    process = await start_server_process(command, own_session=True)
    seen = Seen()
    async with Host.adopt(process, on_message=seen) as host:
        assert host.process is process
        snap = await host.spawn(command=("echo", "adopted"), mode="task")
        assert snap.output is not None and snap.output.text == "adopted\n"
    assert process.returncode == 0  # its stdin closed, it exited on its own
    assert_nothing_left(process.pid)
    assert_no_run_survives(seen.run_ids)


async def test_an_observer_that_raises_ends_the_connection_and_its_waiting_calls(
    tmp_path: Path,
) -> None:
    def refuse(message: Any) -> None:
        raise ValueError("not in the schema")

    seen = Seen()
    seen.also = refuse
    async with started(tmp_path, seen=seen) as (host, _seen):
        with pytest.raises(HostConnectionError) as ended:
            await host.ping()
        assert isinstance(ended.value.__cause__, ValueError)
        assert host.closed is ended.value


async def test_a_server_started_in_its_own_session_is_out_of_reach_of_the_terminals_ctrl_c(
    tmp_path: Path,
) -> None:
    async with Host.start(["--state-dir", str(tmp_path / "state")], own_session=True) as host:
        assert host.process is not None
        pid = host.process.pid
        # A session and process group of its own: SIGINT to ours does not reach it.
        assert os.getsid(pid) == pid and os.getpgid(pid) == pid != os.getpgid(0)
        assert (await host.ping()).pong
    assert_nothing_left(pid)
