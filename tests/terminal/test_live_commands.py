"""`subagent-host send`, `interrupt`, `close` and `permit` from another process, against a
real server process whose run has an interactive `command` child (one line in, the next
line out), through the server's control socket (protocol.md §10.1, §23); and what they
say when the run cannot take them."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from subagent_host.client import RequestRefused
from subagent_host.client.control import connect_control
from subagent_host.rpc.control_socket import CONTROL_DIR
from subagent_host.values.events import InputEvent, OutputEvent, TurnEvent
from tests.runs.test_live_children import LINES
from tests.terminal import inspecting
from tests.terminal.test_stop import EXIT_S, Server, serving, stop_command

pytestmark = pytest.mark.e2e


async def command(state: Path, name: str, *args: str) -> tuple[int, str, str]:
    """`subagent-host NAME ARGS --state-dir STATE` as a process of its own."""
    done = await inspecting.command(name, *args, "--state-dir", str(state))
    return done.status, done.stdout, done.stderr


async def interactive(server: Server) -> str:
    """An interactive child that answered its first prompt and waits for the next line."""
    spawned: Any = await server.host.request(
        "spawn",
        {
            "command": [sys.executable, "-u", "-c", LINES],
            "prompt": "hello",
            "interactive": True,
            "stream": True,
        },
    )
    run_id: str = spawned["runId"]
    await turn_ended(server, run_id, 1)
    return run_id


async def turn_ended(server: Server, run_id: str, count: int) -> str | None:
    """Until the run's `count`th turn ended; its stop reason."""
    ends = 0
    async with asyncio.timeout(EXIT_S):
        async for event in server.host.events(run_id):
            if isinstance(event.event, TurnEvent) and event.event.phase == "end":
                ends += 1
                if ends == count:
                    return event.event.stop_reason
    raise AssertionError("the run ended first")


async def test_send_interrupt_and_close_from_another_process_reach_the_interactive_child(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as server:
        run_id = await interactive(server)
        name = run_id[:8]

        code, out, err = await command(server.state, "send", name, "world")
        assert (code, err) == (0, "")
        message_id, state = out.split()
        assert state == "delivered"
        assert await turn_ended(server, run_id, 2) == "end_turn"
        # A turn that goes on: a steered message goes into it, a queued one waits.
        assert (await command(server.state, "send", name, "quiet please"))[0] == 0
        code, out, _err = await command(server.state, "send", name, "queued", "--index", "0")
        assert (code, out.split()[1]) == (0, "queued")
        code, out, _err = await command(server.state, "interrupt", name)
        assert (code, out) == (0, "interrupted turn 3\n")
        assert await turn_ended(server, run_id, 3) == "interrupted"
        assert await turn_ended(server, run_id, 4) == "end_turn"  # the queued message's
        code, out, _err = await command(server.state, "interrupt", name)
        assert (code, out) == (0, "nothing to interrupt: the child is waiting after turn 4\n")

        code, out, err = await command(server.state, "close", name)
        assert (code, err) == (0, "")
        assert out.startswith(f"run {name} completed after ")

        again = await command(server.state, "close", name)
        late = await command(server.state, "send", name, "too late")

        events = [e.event async for e in server.host.events(run_id)]
    assert again == (0, f"run {name} had already ended: completed\n", "")
    assert late == (
        1,
        "",
        f"subagent-host send: run {name} is not running: it has ended: completed\n",
    )
    said = [(e.text, e.state) for e in events if isinstance(e, InputEvent)]
    assert said[0] == ("world", "delivered")
    assert [e.message_id for e in events if isinstance(e, InputEvent)][0] == message_id
    assert ("queued", "queued") in said and ("queued", "delivered") in said
    printed = "".join(e.text for e in events if isinstance(e, OutputEvent))
    assert printed == "got hello\ngot world\ngot queued\n"


async def test_a_child_that_is_not_interactive_or_a_permission_that_is_not_pending_is_refused(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as server:
        plain = await server.spawn_ready(("sh", "-c", "echo ready; exec sleep 300"))
        run_id = await interactive(server)

        send = await command(server.state, "send", plain[:8], "hello")
        interrupt = await command(server.state, "interrupt", plain[:8])
        close = await command(server.state, "close", plain[:8])
        close_child = await command(server.state, "close", plain[:8], "--index", "0")
        permit = await command(server.state, "permit", run_id, "0.nothing", "allow")
        beyond = await command(server.state, "send", run_id, "hi", "--index", "3")

        assert (await stop_command(server.state, plain))[0] == 0
        assert (await command(server.state, "close", run_id))[0] == 0
    assert send[0] == interrupt[0] == 1
    assert send[2] == (
        f"subagent-host send: the server that runs {plain[:8]} refused: run {plain} has no"
        " interactive child: it takes no messages\n"
    )
    assert interrupt[2].startswith(f"subagent-host interrupt: the server that runs {plain[:8]}")
    assert close == (
        1,
        "",
        f"subagent-host close: run {plain[:8]} has no interactive child: there is nothing to"
        " close\n",
    )
    assert close_child[0] == 1 and "child 0 of run" in close_child[2]
    assert "is not interactive" in close_child[2]
    assert permit == (
        1,
        "",
        f"subagent-host permit: run {run_id[:8]} has no pending permission '0.nothing'"
        " (pending: none)\n",
    )
    assert beyond[0] == 1 and "has 1 child (index 0..0)" in beyond[2]


async def test_a_run_that_is_not_running_anywhere_or_is_unknown_is_said_so(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as server:
        run_id = await interactive(server)
        unknown = await command(server.state, "send", "0123456789abcdef", "hello")
        assert server.host.process is not None
        dead_pid = server.host.process.pid
        server.host.process.kill()  # the server we started, by its pid
        await server.host.process.wait()

        orphaned = [
            await command(server.state, name, run_id, *args)
            for name, args in (
                ("send", ("hello",)),
                ("interrupt", ()),
                ("close", ()),
                ("permit", ("0.x", "reject")),
            )
        ]
        server.seen.run_ids.clear()  # its processes are the next server's to end
    async with serving(tmp_path, "b"):
        pass  # ends what the killed server left (its run's child), and proves it
    assert unknown[0] == 1 and "no run '0123456789abcdef'" in unknown[2]
    for (code, out, err), name in zip(
        orphaned, ("send", "interrupt", "close", "permit"), strict=True
    ):
        assert (code, out) == (1, "")
        assert err.startswith(f"subagent-host {name}: run {run_id[:8]} is not running: ")
        assert f"the server process {dead_pid} is gone" in err


async def test_the_control_socket_takes_the_live_run_methods_by_full_id(tmp_path: Path) -> None:
    async with serving(tmp_path) as server:
        run_id = await interactive(server)
        assert server.host.process is not None
        (path,) = (server.state / CONTROL_DIR).iterdir()
        async with await connect_control(path, pid=server.host.process.pid) as control:
            sent = await control.request("run/send", {"runId": run_id, "text": "socket"})
            assert sent["state"] == "delivered"
            with pytest.raises(RequestRefused) as refused:
                await control.request(
                    "run/permit", {"runId": run_id, "permissionId": "0.x", "optionId": "allow"}
                )
            assert refused.value.data == {
                "reason": "not-pending",
                "runId": run_id,
                "permissionId": "0.x",
            }
            closed = await control.request("run/close", {"runId": run_id})
        assert closed["status"] == "completed"
