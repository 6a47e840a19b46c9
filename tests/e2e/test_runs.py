"""spawn, status and stop over real stdio: runs end truthfully and nothing survives them."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from subagent_host.client import (
    BackendUnavailable,
    LaunchRejected,
    RunNotFound,
    SpawnItem,
)
from subagent_host.values.events import StatusEvent
from tests.e2e.client import client_of
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    FramingName,
    ServerProcess,
    result_of,
    running_server,
    state_args,
)

FRAMINGS: list[FramingName] = ["ndjson", "lsp"]
FAKES = Path(__file__).resolve().parent.parent / "fakes"
TERMINAL = {"completed", "failed", "cancelled", "timed-out", "limit-reached", "interrupted"}


async def call(server: ServerProcess, method: str, params: Any) -> tuple[Any, list[Any]]:
    """Send a request; return its reply and the notifications that came before it."""
    server._next_id += 1
    msg_id = server._next_id
    await server.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    notes: list[Any] = []
    while True:
        message = await server.receive()
        if message.get("id") == msg_id:
            return message, notes
        notes.append(message)


async def next_event(server: ServerProcess, event_type: str) -> dict[str, Any]:
    """Read messages until a `run/event` of that type arrives."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:
            message = await server.receive()
            if message.get("method") == "run/event" and message["params"]["type"] == event_type:
                return message["params"]  # type: ignore[no-any-return]


def assert_terminal_snapshot(snapshot: dict[str, Any]) -> None:
    for item in (snapshot, *snapshot["children"]):
        assert item["status"] in TERMINAL
        output = item.get("output")
        if item["status"] == "completed":
            assert output is None or output["partial"] is False
        else:
            assert output is None or output["partial"] is True
        if item["status"] == "failed":
            assert {"code", "message"} <= item["error"].keys()
        if item["status"] in ("cancelled", "timed-out", "interrupted"):
            assert item["reason"]
    if snapshot["status"] == "timed-out":
        assert snapshot["enforcedTimeoutMs"] > 0


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_task_mode_spawn_answers_the_completed_run_after_its_events(
    framing: FramingName,
) -> None:
    async with running_server(framing=framing) as server:
        reply, notes = await call(
            server, "spawn", {"command": ["echo", "hello"], "mode": "task", "label": "greet"}
        )
        run = reply["result"]
        assert run["status"] == "completed" and run["label"] == "greet"
        assert run["output"] == {
            "text": "hello\n", "truncated": False, "bytes": 6, "lines": 1, "partial": False
        }  # fmt: skip
        assert run["fingerprint"].startswith("sha256:v1:") and len(run["fingerprint"]) == 74
        assert_terminal_snapshot(run)
        events = [n["params"] for n in notes if n["method"] == "run/event"]
        assert [e["seq"] for e in events] == list(range(1, run["lastSeq"] + 1))
        assert [(e["type"], e["status"]) for e in events] == [
            ("status", "queued"),
            ("status", "running"),
            ("child", "running"),
            ("child", "completed"),
            ("status", "completed"),
        ]
        assert await server.finish() == (0, [])


async def test_background_spawn_then_wait_and_since_replay() -> None:
    async with running_server() as server, client_of(server) as host:
        run = await host.spawn(command=("sh", "-c", "echo a; echo b"))
        assert run.status == "running"
        snapshot = await host.wait(run.run_id)
        assert snapshot.status == "completed"
        assert snapshot.output is not None and snapshot.output.text == "a\nb\n"
        replay = await host.status(run.run_id, since=2)
        assert replay.events is not None
        assert [e.seq for e in replay.events] == list(range(3, replay.last_seq + 1))
        listing = await host.status()
        assert [r.run_id for r in listing.runs] == [run.run_id]


async def test_stop_ends_a_tree_and_a_second_stop_says_already_terminal() -> None:
    async with running_server() as server, client_of(server) as host:
        tree = (sys.executable, str(FAKES / "tree.py"), "8")
        run = await host.spawn(command=tree, stream=True)
        async for event in host.events(run.run_id):
            if event.type == "output":  # "ready" once all 8 processes exist
                break
        stopped = await host.stop(run_id=run.run_id, reason="enough")
        assert (stopped.status, stopped.reason, stopped.already_terminal) == (
            "cancelled", "enough", False
        )  # fmt: skip
        again = await host.stop(run_id=run.run_id)
        assert again.already_terminal is True and again.reason == "enough"


async def spawn_until_ready(server: ServerProcess, command: list[str]) -> dict[str, Any]:
    """Spawn a streaming background run and return it once it printed its first line."""
    reply, notes = await call(server, "spawn", {"command": command, "stream": True})
    run = reply["result"]
    printed = [n for n in notes if n.get("method") == "run/event"]
    if not any(e["params"]["type"] == "output" for e in printed):  # not before the reply
        assert (await next_event(server, "output"))["runId"] == run["runId"]
    return run  # type: ignore[no-any-return]


async def test_stop_says_which_signal_ended_each_child_and_a_later_server_still_does(
    tmp_path: Path,
) -> None:
    tree = [sys.executable, str(FAKES / "tree.py"), "1"]
    async with running_server(*state_args(tmp_path)) as server:
        ended = await result_of(server, "spawn", {"command": ["true"], "mode": "task"})
        # "ready" once its SIGTERM disposition is set: the default, then ignored.
        honours = await spawn_until_ready(server, tree)
        ignores = await spawn_until_ready(server, [*tree, "--ignore-term"])
        first = await result_of(server, "stop", {"runId": honours["runId"], "graceMs": 5000})
        second = await result_of(server, "stop", {"runId": ignores["runId"], "graceMs": 100})
        children = [run["children"][0] for run in (ended, first, second)]
        assert [(c.get("signal"), c["stoppedBy"]) for c in children] == [
            (None, "exit"), ("SIGTERM", "sigterm"), ("SIGKILL", "sigkill")
        ]  # fmt: skip
        assert (await server.finish())[0] == 0
    async with running_server(*state_args(tmp_path)) as later:
        for run, child in zip((ended, first, second), children, strict=True):
            again = await result_of(later, "status", {"runId": run["runId"]})
            assert again["children"][0]["stoppedBy"] == child["stoppedBy"]
        assert (await later.finish())[0] == 0


async def test_exit_code_timeout_and_bad_launches_are_reported() -> None:
    async with running_server() as server, client_of(server) as host:
        failed = await host.spawn(command=("sh", "-c", "exit 7"), mode="task")
        assert failed.status == "failed"
        assert failed.error is not None and failed.error.data is not None
        assert failed.error.data["exitCode"] == 7
        timed = await host.spawn(command=("sleep", "30"), timeout_ms=200, mode="task")
        assert (timed.status, timed.reason) == ("timed-out", "timeout")
        assert timed.enforced_timeout_ms == 200
        with pytest.raises(BackendUnavailable):
            await host.spawn(prompt="hi")
        with pytest.raises(LaunchRejected) as rejected:
            await host.spawn(command=("true",), cwd="/nonexistent")
        assert rejected.value.data["diagnostics"][0]["path"] == "cwd"
        with pytest.raises(LaunchRejected):
            await host.spawn(command=("true",), tasks=(SpawnItem(command=("true",)),))
        with pytest.raises(RunNotFound):
            await host.status("no-such-run")


async def test_cancelling_a_task_mode_spawn_stops_its_run_and_answers_the_snapshot() -> None:
    async with running_server() as server:
        await server.send({"jsonrpc": "2.0", "id": "long", "method": "spawn",
                           "params": {"command": ["sleep", "30"], "mode": "task"}})  # fmt: skip
        await next_event(server, "child")  # the child runs
        await server.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "long"}})
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while (reply := await server.receive()).get("id") != "long":
                pass
        assert reply["error"]["code"] == -32800
        assert reply["error"]["message"] == "request cancelled; its run was stopped"  # §3.5
        assert reply["error"]["data"]["status"] == "cancelled"
        assert reply["error"]["data"]["reason"] == "request cancelled"
        assert_terminal_snapshot(reply["error"]["data"])
        await server.finish()


async def test_eof_finishes_task_mode_spawns_and_cancels_background_runs() -> None:
    async with running_server() as server:
        await server.send({"jsonrpc": "2.0", "id": "bg", "method": "spawn",
                           "params": {"command": ["sleep", "30"]}})  # fmt: skip
        await server.send({"jsonrpc": "2.0", "id": "task", "method": "spawn",
                           "params": {"command": ["sh", "-c", "sleep 0.5; echo done"],
                                      "mode": "task"}})  # fmt: skip
        code, messages = await server.finish()
        assert code == 0
        task = next(m for m in messages if m.get("id") == "task")
        assert task["result"]["status"] == "completed"
        bg_id = next(m for m in messages if m.get("id") == "bg")["result"]["runId"]
        final = [m["params"] for m in messages
                 if m.get("method") == "run/event" and m["params"]["runId"] == bg_id]  # fmt: skip
        assert final[-1] == {**final[-1], "type": "status", "status": "cancelled"}


async def test_eof_says_on_stderr_how_many_background_runs_it_cancels() -> None:
    async with running_server() as server:
        for _ in range(2):
            await result_of(server, "spawn", {"command": ["sleep", "30"]})
        await result_of(server, "spawn", {"command": ["true"], "mode": "task"})  # ended: not one
        code, _ = await server.finish()
        assert code == 0
        said = [line for line in server.stderr_text.splitlines() if "cancel" in line]
        assert len(said) == 1 and " 2 " in said[0] and "WARNING" in said[0], server.stderr_text


async def test_eof_with_no_background_run_says_nothing_of_cancelling() -> None:
    async with running_server() as server:
        await result_of(server, "spawn", {"command": ["true"], "mode": "task"})
        assert (await server.finish())[0] == 0
        assert "cancel" not in server.stderr_text, server.stderr_text


async def test_sigterm_stops_background_runs_and_leaves_nothing() -> None:
    async with running_server() as server:
        tree = [sys.executable, str(FAKES / "tree.py"), "4"]
        await call(server, "spawn", {"command": tree, "stream": True})
        await next_event(server, "output")  # "ready": all four processes exist
        pids_before = {p.pid for p in psutil.Process(server.pid).children(recursive=True)}
        assert pids_before
        server.signal(signal.SIGTERM)
        assert await asyncio.wait_for(server.proc.wait(), EXIT_TIMEOUT_S) == 0
        assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
                       for pid in pids_before)  # fmt: skip


async def test_an_environment_variable_off_the_allowlist_never_reaches_the_child() -> None:
    # LC_SECRET starts like a locale variable but is none: only the categories pass.
    env = {**os.environ, "SERVER_SECRET_TOKEN": "hunter2", "LC_SECRET": "x", "LC_TIME": "C"}
    async with running_server(env=env) as server:
        spawn = {"command": ["env"], "env": {"GIVEN": "yes"}, "mode": "task"}
        reply, _ = await call(server, "spawn", spawn)
        text = reply["result"]["output"]["text"]
        assert "SERVER_SECRET_TOKEN" not in text and "GIVEN=yes" in text
        lines = text.splitlines()
        assert "LC_TIME=C" in lines and not any(line.startswith("LC_SECRET") for line in lines)
        assert "SUBAGENT_HOST_DEPTH=1" in text and "PI_AGENT_LEAF=1" in text
        await server.finish()


async def test_a_child_printing_200_mb_is_capped_and_the_server_stays_small() -> None:
    async with running_server() as server:
        flood = [sys.executable, str(FAKES / "flood.py"), "200"]
        reply, _ = await call(server, "spawn", {"command": flood, "mode": "task"})
        output = reply["result"]["output"]
        assert output["bytes"] == 200 * 1024 * 1024 and output["lines"] == 200 * 1024
        assert output["truncated"] is True and output["text"].endswith("[output truncated]")
        assert len(output["text"].encode()) <= 48 * 1024 + 64
        peak = _peak_rss_bytes(server.pid)
        assert peak < 100 * 1024 * 1024, f"server peak RSS {peak} bytes"
        await server.finish()


async def test_a_child_printing_200_mib_without_a_newline_is_one_capped_line() -> None:
    # `tr` writes 8 KiB at a time: the server reads the stream in small chunks.
    total = 200 * 1024 * 1024
    flat = ["sh", "-c", f"head -c {total} /dev/zero | tr '\\0' x"]
    async with running_server() as server:
        # `redact: false`: one run of `x` would be redacted (the test below).
        spawn = {"command": flat, "mode": "task", "redact": False}
        reply, _ = await call(server, "spawn", spawn)
        output = reply["result"]["output"]
        assert (output["bytes"], output["lines"], output["truncated"]) == (total, 1, True)
        assert output["text"] == "x" * 48 * 1024 + "\n[output truncated]"
        peak = _peak_rss_bytes(server.pid)
        assert peak < 100 * 1024 * 1024, f"server peak RSS {peak} bytes"
        await server.finish()


async def test_a_streamed_child_without_a_newline_arrives_whole_in_gap_free_events() -> None:
    total = 4 * 1024 * 1024 + 5  # small writes of `tr`, and an odd end
    flat = ["sh", "-c", f"head -c {total} /dev/zero | tr '\\0' x"]
    async with running_server() as server:
        reply, notes = await call(
            server, "spawn", {"command": flat, "mode": "task", "stream": True, "redact": False}
        )
        run = reply["result"]
        events = [n["params"] for n in notes if n["method"] == "run/event"]
        assert [e["seq"] for e in events] == list(range(1, run["lastSeq"] + 1))
        streamed = "".join(e["text"] for e in events if e["type"] == "output")
        assert streamed == "x" * total
        assert (run["output"]["bytes"], run["output"]["lines"]) == (total, 1)
        assert await server.finish() == (0, [])


async def test_a_base64_like_run_of_64_mib_is_counted_not_kept_and_sent_as_one_marker() -> None:
    total = 64 * 1024 * 1024
    flat = ["sh", "-c", f"head -c {total} /dev/zero | tr '\\0' x; echo; echo done"]
    async with running_server() as server:
        reply, notes = await call(
            server, "spawn", {"command": flat, "mode": "task", "stream": True}
        )
        run = reply["result"]
        streamed = "".join(n["params"]["text"] for n in notes if n["params"]["type"] == "output")
        expected = f"[redacted: {total} bytes]\ndone\n"
        assert streamed == expected and run["output"]["text"] == expected
        assert (run["output"]["bytes"], run["output"]["lines"]) == (len(expected), 2)
        peak = _peak_rss_bytes(server.pid)
        assert peak < 100 * 1024 * 1024, f"server peak RSS {peak} bytes"
        assert await server.finish() == (0, [])


def _peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


async def test_a_server_at_the_maximum_depth_refuses_to_spawn() -> None:
    env = {**os.environ, "SUBAGENT_HOST_DEPTH": "1"}
    async with running_server(env=env) as server, client_of(server) as host:
        with pytest.raises(LaunchRejected) as refused:
            await host.spawn(command=("true",))
        assert refused.value.data["diagnostics"][0]["code"] == "max-depth"


async def test_a_run_waiting_behind_the_concurrency_limit_is_queued_then_running() -> None:
    async with running_server("--max-concurrency", "1") as server, client_of(server) as host:
        blocker = await host.spawn(command=("sleep", "300"))
        waiting = await host.spawn(command=("echo", "later"))
        assert blocker.status == "running"
        assert waiting.status == "queued" and waiting.started_at is None
        listed = await host.status()
        assert {r.run_id: r.status for r in listed.runs} == {
            blocker.run_id: "running",
            waiting.run_id: "queued",
        }
        await host.stop(run_id=blocker.run_id, grace_ms=500)
        run = await host.wait(waiting.run_id)
        assert run.status == "completed" and run.started_at is not None
        events = [e async for e in host.events(waiting.run_id)]
        assert [e.event.status for e in events if isinstance(e.event, StatusEvent)] == [
            "queued",
            "running",
            "completed",
        ]
