"""Memory stays flat whatever the client does: bounded event history, flow control (issue 11)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any, Final

import psutil

from tests.e2e.harness import EXIT_TIMEOUT_S, result_of, running_server, state_args

FAKES: Final = Path(__file__).resolve().parent.parent / "fakes"
MIB: Final = 1024 * 1024
# The documented bound on a run's retained events (protocol.md §9).
EVENT_BUDGET: Final = 8 * MIB


def text_bytes(events: list[dict[str, Any]]) -> int:
    return sum(len(event.get("text", "").encode()) for event in events)


async def test_status_since_after_a_run_over_the_byte_budget_names_the_oldest_event_held(
    tmp_path: Path,
) -> None:
    args = state_args(tmp_path / "state")
    flood = [sys.executable, str(FAKES / "flood.py"), "12"]
    async with running_server(*args) as server:
        run = await result_of(server, "spawn", {"command": flood, "stream": True, "mode": "task"})
        assert run["status"] == "completed"
        replay = await result_of(server, "status", {"runId": run["runId"], "since": 0})
        first = replay["firstRetainedSeq"]
        events = replay["events"]
        assert first > 1 and events[0]["seq"] == first
        assert [e["seq"] for e in events] == list(range(first, run["lastSeq"] + 1))
        assert text_bytes(events) <= EVENT_BUDGET
        assert len(json.dumps(replay)) < EVENT_BUDGET + MIB
        # Asking from the oldest event held, or for nothing, is no gap: no firstRetainedSeq.
        rest = await result_of(server, "status", {"runId": run["runId"], "since": first - 1})
        assert "firstRetainedSeq" not in rest and rest["events"] == events
        none = await result_of(server, "status", {"runId": run["runId"], "since": run["lastSeq"]})
        assert "firstRetainedSeq" not in none and none["events"] == []
        await server.finish()

    db = sqlite3.connect(tmp_path / "state" / "subagent-host.sqlite3")
    try:
        held, oldest, stored = db.execute(
            "SELECT count(*), min(seq),"
            " sum(length(CAST(json_extract(record, '$.fields.text') AS BLOB)))"
            " FROM events WHERE run_id = ?",
            (run["runId"],),
        ).fetchone()
    finally:
        db.close()
    assert oldest == first and held == run["lastSeq"] - first + 1
    assert stored <= EVENT_BUDGET

    async with running_server(*args) as later:  # from disk, the same answer
        again = await result_of(later, "status", {"runId": run["runId"], "since": 0})
        assert again["firstRetainedSeq"] == first and again["events"] == events
        await later.finish()


# How long the flood child's write count must stand still to count as blocked.
STILL_S: Final = 1.0
STALL_TIMEOUT_MS: Final = 1000


async def _flood_child(server_pid: int) -> psutil.Process:
    """The flood.py process the server started (bounded wait for it to appear)."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:
            for child in psutil.Process(server_pid).children():
                with contextlib.suppress(psutil.Error):
                    if any("flood.py" in part for part in child.cmdline()):
                        return child
            await asyncio.sleep(0.05)


async def _wait_blocked(child: psutil.Process) -> int:
    """Wait until the child's write count stands still for STILL_S; return it."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        written, since = -1, 0.0
        loop = asyncio.get_running_loop()
        while True:
            try:
                now_written = child.io_counters().write_chars
            except psutil.NoSuchProcess:
                raise AssertionError("the child ran to its end: nothing held it back") from None
            if now_written != written:
                written, since = now_written, loop.time()
            elif loop.time() - since >= STILL_S:
                return written
            await asyncio.sleep(0.1)


async def _read_pipe(fd: int) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * MIB)
    pipe = os.fdopen(fd, "rb", buffering=0)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    return reader


async def test_a_client_that_stops_reading_holds_a_streaming_child_back_and_loses_nothing(
    tmp_path: Path,
) -> None:
    read_fd, write_fd = os.pipe()  # the server's stdout, which nobody reads for now
    flood = [sys.executable, str(FAKES / "flood.py"), "50"]
    async with running_server(*state_args(tmp_path / "state"), stdout=write_fd) as server:
        os.close(write_fd)
        params = {
            "command": flood,
            "stream": True,
            "mode": "task",
            "stallTimeoutMs": STALL_TIMEOUT_MS,
        }
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "spawn", "params": params})
        child = await _flood_child(server.pid)
        written = await _wait_blocked(child)
        assert written < 40 * MIB, "the child ran on although nobody read its output"
        # Held back for longer than its stall timeout: not reported stalled (it would be
        # ended), still blocked on write.
        await asyncio.sleep(2 * STALL_TIMEOUT_MS / 1000)
        assert child.is_running() and child.status() != psutil.STATUS_ZOMBIE
        assert child.io_counters().write_chars == written
        rss = psutil.Process(server.pid).memory_info().rss
        assert rss < 100 * MIB, f"server RSS {rss} bytes while the client does not read"

        server._stdout_pipe = await _read_pipe(read_fd)  # the client reads again
        texts: list[str] = []
        seqs: list[int] = []
        async with asyncio.timeout(120):
            while True:
                message = await server.receive()
                if message.get("id") == 1:
                    break
                event = message["params"]
                seqs.append(event["seq"])
                if event["type"] == "output":
                    texts.append(event["text"])
        run = message["result"]
        assert run["status"] == "completed", run
        assert seqs == list(range(1, run["lastSeq"] + 1))
        output = "".join(texts)
        assert len(output) == 50 * MIB and output == ("x " * 511 + "x\n") * (50 * 1024)
        peak = _peak_rss_bytes(server.pid)
        assert peak < 100 * MIB, f"server peak RSS {peak} bytes"
        await server.finish()


def _peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


# A child printing NUL bytes: 6 bytes each in a reply (\u0000), the costliest text to replay.
NUL_BYTES: Final = 8 * MIB + MIB // 2
PIPELINED: Final = 40
# The memory the replies may take beyond the idle server's (README, "Under attack").
REPLIES_BOUND: Final = 150 * 1_000_000
# The server counts as done with what it can answer once its CPU time stands this still.
IDLE_S: Final = 1.0


async def _read_line(fd: int) -> bytes:
    """One line from a pipe read by hand (nothing else reads it yet)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = await asyncio.to_thread(os.read, fd, 64 * 1024)
        assert chunk, "the server closed stdout"
        data += chunk
    return data


async def _peak_while_busy(server: psutil.Process, limit: int) -> int:
    """The server's peak RSS until its CPU time stands still for IDLE_S; fails (having
    SIGKILLed it, so that it cannot take the machine's memory) once past `limit`."""
    loop = asyncio.get_running_loop()
    busy, since, peak = -1.0, loop.time(), 0
    async with asyncio.timeout(EXIT_TIMEOUT_S * 4):
        while True:
            peak = max(peak, server.memory_info().rss)
            if peak > limit:
                server.kill()  # by pid: the server this test started
                raise AssertionError(f"server RSS {peak} bytes > {limit} with replies unread")
            times = server.cpu_times()
            if times.user + times.system != busy:
                busy, since = times.user + times.system, loop.time()
            elif loop.time() - since >= IDLE_S:
                return peak
            await asyncio.sleep(0.02)


async def test_pipelined_replays_of_a_run_are_answered_as_the_client_reads(
    tmp_path: Path,
) -> None:
    args = state_args(tmp_path / "state")
    nuls = ["head", "-c", str(NUL_BYTES), "/dev/zero"]
    async with running_server(*args) as server:
        spawn = {"command": nuls, "stream": True, "mode": "task"}
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "spawn", "params": spawn})
        async with asyncio.timeout(EXIT_TIMEOUT_S * 4):  # its events, read but not checked
            while "id" not in (message := json.loads(await server._stdout.readline())):
                pass
        run = message["result"]
        server.run_ids.add(run["runId"])
        assert run["status"] == "completed"
        await server.finish()

    read_fd, write_fd = os.pipe()  # the new server's stdout, read by hand below
    async with running_server(*args, stdout=write_fd) as later:
        os.close(write_fd)
        await later.send({"jsonrpc": "2.0", "id": 0, "method": "ping"})
        assert json.loads(await _read_line(read_fd))["id"] == 0
        process = psutil.Process(later.pid)
        baseline = process.memory_info().rss
        status = {"runId": run["runId"], "since": 0}
        requests = b"".join(
            json.dumps({"jsonrpc": "2.0", "id": n, "method": "status", "params": status}).encode()
            + b"\n"
            for n in range(1, PIPELINED + 1)
        )
        # All in one write, before reading any reply; the server has read them all
        # (a few KB) long before its output fills.
        await later.send_raw(requests)
        peak = await _peak_while_busy(process, baseline + REPLIES_BOUND)
        assert _peak_rss_bytes(later.pid) <= baseline + REPLIES_BOUND

        later._stdout_pipe = await _read_pipe(read_fd)  # the client reads at last
        replies = [await later.receive() for _ in range(PIPELINED)]
        assert [reply["id"] for reply in replies] == list(range(1, PIPELINED + 1))
        first = replies[0]["result"]
        assert first["events"][-1]["seq"] == first["lastSeq"] == run["lastSeq"]
        assert all(reply["result"] == first for reply in replies)
        replayed = sum(len(event.get("text", "")) for event in first["events"])
        assert 0 < replayed < NUL_BYTES and first["firstRetainedSeq"] > 1
        # The budget counts the reply's bytes: six per NUL.
        assert len(json.dumps(first)) < EVENT_BUDGET + MIB
        code, rest = await later.finish()
        assert code == 0 and rest == [], rest
    assert peak <= baseline + REPLIES_BOUND, (peak, baseline)
