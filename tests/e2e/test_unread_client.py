"""A client that stops reading delays only what is delivered to it (protocol.md §6, flow
control): its runs still end, their ends are recorded and their slots freed, and a `stop`
from another process is answered. Everything is delivered, in order, once it reads again.

The server's stdout here is a pipe the test does not read until the end; what happened
meanwhile is seen from outside, in the state database (store/browse.py, a read-only
second reader) and through `subagent-host stop` on the server's control socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Final

import psutil

from subagent_host.rpc.control_socket import CONTROL_DIR
from subagent_host.runs.state import Run
from subagent_host.store.browse import StateBrowser
from subagent_host.values import RunStatus
from subagent_host.values.durations import duration_ms
from tests.e2e.harness import EXIT_TIMEOUT_S, ServerProcess, running_server, state_args

MIB: Final = 1024 * 1024
TIMEOUT_MS: Final = 3000
# Generous: a run's end is bounded by its timeout and the stop sequence, not by the
# client; a run that waits for its client never ends at all.
END_MARGIN_MS: Final = 20_000
# How long the flooding child's write count must stand still to count as held back.
STILL_S: Final = 1.0
FLOOD: Final = ("yes",)


def _recorded(state: Path) -> dict[str, Run]:
    """The runs recorded so far, by label."""
    with StateBrowser.open(state) as browser:
        return {b.run.label or "": b.run for b in browser.runs(limit=100)}


async def _until_serving(state: Path) -> None:
    """Wait for the server's control socket: its database is ready by then."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:
            if any((state / CONTROL_DIR).glob("*.sock")):
                return
            await asyncio.sleep(0.05)  # another process makes it and cannot wake this test


async def _until_recorded(state: Path, *labels: str, ended: bool) -> dict[str, Run]:
    """Wait until every run `labels` names is recorded (and, with `ended`, ended)."""
    await _until_serving(state)
    async with asyncio.timeout((TIMEOUT_MS + END_MARGIN_MS) / 1000):
        while True:
            runs = await asyncio.to_thread(_recorded, state)
            if all(label in runs and (runs[label].is_terminal or not ended) for label in labels):
                return runs
            await asyncio.sleep(0.05)  # another process writes it and cannot wake this reader


def _yes_child(server_pid: int) -> psutil.Process | None:
    for child in psutil.Process(server_pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.cmdline() == list(FLOOD):
                return child
    return None


async def _wait_held_back(server_pid: int) -> None:
    """Wait until the flooding child blocks on write: the client's queue is full."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:
            child = await asyncio.to_thread(_yes_child, server_pid)
            if child is not None:
                break
            await asyncio.sleep(0.05)  # another process's start: nothing of ours to await
        written, since = -1, 0.0
        while True:
            now_written = child.io_counters().write_chars
            if now_written != written:
                written, since = now_written, loop.time()
            elif loop.time() - since >= STILL_S:
                return
            await asyncio.sleep(0.1)  # a process's kernel counters: nothing to await


async def _spawn(server: ServerProcess, msg_id: int, **params: Any) -> None:
    """Send a background spawn, without reading its reply (nobody reads for now)."""
    message = {"jsonrpc": "2.0", "id": msg_id, "method": "spawn", "params": params}
    await server.send(message)


async def _read_again(server: ServerProcess, read_fd: int) -> None:
    """The client reads the server's stdout again, from where it stopped."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * MIB)
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    server._stdout_pipe = reader


def _events_of(messages: list[Any], run_id: str) -> list[dict[str, Any]]:
    return [
        message["params"]
        for message in messages
        if message.get("method") == "run/event" and message["params"]["runId"] == run_id
    ]


def _assert_delivered_whole(events: list[dict[str, Any]], last: str) -> str:
    """Every event of the run, in order, ending with its terminal status; its output."""
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    assert (events[-1]["type"], events[-1]["status"]) == ("status", last)
    output = "".join(event["text"] for event in events if event["type"] == "output")
    assert output == "y\n" * (len(output) // 2)
    return output


async def test_a_run_timed_out_while_its_client_reads_nothing_ends_and_frees_its_slot(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    read_fd, write_fd = os.pipe()  # the server's stdout, which nobody reads for now
    args = (*state_args(state), "--max-concurrency", "1")
    async with running_server(*args, stdout=write_fd) as server:
        os.close(write_fd)
        flood = {"command": FLOOD, "stream": "raw", "timeoutMs": TIMEOUT_MS, "label": "flood"}
        await _spawn(server, 1, mode="background", **flood)
        # Queued behind it: it starts only once the first run's slot is free.
        await _spawn(server, 2, mode="background", command=["true"], label="next")

        runs = await _until_recorded(state, "flood", "next", ended=True)

        timed_out, after = runs["flood"], runs["next"]
        assert (timed_out.status, timed_out.reason) == (RunStatus.TIMED_OUT, "timeout")
        took = duration_ms(timed_out.started_at, timed_out.ended_at)
        assert took is not None and TIMEOUT_MS <= took < TIMEOUT_MS + END_MARGIN_MS
        assert after.status is RunStatus.COMPLETED
        assert after.started_at is not None and timed_out.ended_at is not None
        assert after.started_at >= timed_out.ended_at  # it had to wait for that slot

        await _read_again(server, read_fd)  # the client reads again: nothing was lost
        code, messages = await server.finish()
    assert code == 0
    replies = {m["id"]: m["result"]["runId"] for m in messages if "id" in m}
    assert replies == {1: timed_out.run_id, 2: after.run_id}
    output = _assert_delivered_whole(_events_of(messages, timed_out.run_id), "timed-out")
    # Held back: far less than `yes` writes in three seconds when it is read.
    assert 0 < len(output) < 64 * MIB
    _assert_delivered_whole(_events_of(messages, after.run_id), "completed")


async def _stop_command(state: Path, run_id: str) -> tuple[int, str, str]:
    """`subagent-host stop RUN` as a process of its own, given EXIT_TIMEOUT_S to answer."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "subagent_host",
        "stop",
        run_id,
        "--state-dir",
        str(state),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()  # by pid: the process this test started
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_stop_from_another_process_of_a_run_whose_client_reads_nothing_is_answered(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    read_fd, write_fd = os.pipe()  # the server's stdout, which nobody reads for now
    async with running_server(*state_args(state), stdout=write_fd) as server:
        os.close(write_fd)
        await _spawn(server, 1, mode="background", command=FLOOD, stream="raw", label="flood")
        await _wait_held_back(server.pid)
        run_id = (await _until_recorded(state, "flood", ended=False))["flood"].run_id

        code, out, err = await _stop_command(state, run_id)

        assert (code, err) == (0, "")
        assert out.startswith(f"run {run_id[:8]} cancelled after ")
        with StateBrowser.open(state) as browser:
            recorded = browser.load(run_id)
        assert recorded is not None and recorded.status is RunStatus.CANCELLED
        assert recorded.reason == "stopped by subagent-host stop"

        await _read_again(server, read_fd)  # the client reads again: nothing was lost
        code, messages = await server.finish()
    assert code == 0
    _assert_delivered_whole(_events_of(messages, run_id), "cancelled")


async def test_a_streamed_childs_stderr_is_held_back_too_and_delivered_whole_later(
    tmp_path: Path,
) -> None:
    """Its stderr goes out as `stderr` events: while the client reads nothing the child
    blocks on its stderr as it would on its stdout, and nothing piles up."""
    state = tmp_path / "state"
    read_fd, write_fd = os.pipe()  # the server's stdout, which nobody reads for now
    async with running_server(*state_args(state), stdout=write_fd) as server:
        os.close(write_fd)
        command = ["sh", "-c", "exec yes >&2"]  # `yes` itself, writing to stderr
        await _spawn(server, 1, mode="background", command=command, stream=True, label="flood")
        await _wait_held_back(server.pid)
        run_id = (await _until_recorded(state, "flood", ended=False))["flood"].run_id

        code, _, err = await _stop_command(state, run_id)
        assert (code, err) == (0, "")

        await _read_again(server, read_fd)  # the client reads again: nothing was lost
        code, messages = await server.finish()
    assert code == 0
    events = _events_of(messages, run_id)
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    assert (events[-1]["type"], events[-1]["status"]) == ("status", "cancelled")
    assert not [event for event in events if event["type"] == "output"]
    stderr = "".join(event["text"] for event in events if event["type"] == "stderr")
    assert 0 < len(stderr) < 64 * MIB and stderr == "y\n" * (len(stderr) // 2)
