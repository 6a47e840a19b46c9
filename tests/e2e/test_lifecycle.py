"""Shutdown and stdio kinds: EOF, SIGTERM/SIGINT, regular files, a terminal, a vanished reader."""

from __future__ import annotations

import array
import asyncio
import fcntl
import json
import os
import pty
import signal
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    FramingName,
    assert_conforming,
    assert_nothing_left,
    frame,
    result_of,
    running_server,
    server_executable,
)

FRAMINGS: list[FramingName] = ["ndjson", "lsp"]
FAKES = Path(__file__).parent.parent / "fakes"
# Half of Linux's default pipe: whole pages hold less than 64 KiB of small writes.
PIPE_BACKED_UP = 32 * 1024


def ping(msg_id: int) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "ping"}


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_eof_answers_every_request_already_read_then_exits_0(framing: FramingName) -> None:
    async with running_server(framing=framing) as server:
        await server.send_raw(
            b"".join(frame(json.dumps(ping(i)).encode(), framing) for i in range(200))
        )
        code, replies = await server.finish()
        assert code == 0
        assert sorted(reply["id"] for reply in replies) == list(range(200))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_stop_signal_ends_an_idle_server_with_status_0(signum: signal.Signals) -> None:
    async with running_server() as server:
        assert (await server.request("ping"))["result"]["pong"] is True
        server.signal(signum)  # stdin stays open: the signal alone must end it
        assert await asyncio.wait_for(server.proc.wait(), EXIT_TIMEOUT_S) == 0


async def test_empty_input_exits_0_with_no_output() -> None:
    async with running_server() as server:
        assert await server.finish() == (0, [])


@pytest.mark.parametrize("framing", FRAMINGS)
def test_stdin_and_stdout_may_be_regular_files(tmp_path: Path, framing: FramingName) -> None:
    requests = tmp_path / "requests"
    replies = tmp_path / "replies"
    requests.write_bytes(b"".join(frame(json.dumps(ping(i)).encode(), framing) for i in range(50)))
    with requests.open("rb") as stdin, replies.open("wb") as stdout:
        done = subprocess.run(  # noqa: TID251 - a synchronous test of a synchronous shell use
            [server_executable()], stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, timeout=60
        )
    assert done.returncode == 0, done.stderr
    data = replies.read_bytes()
    if framing == "ndjson":
        bodies = data.splitlines()
    else:
        bodies = [part.split(b"\r\n\r\n", 1)[1] for part in data.split(b"Content-Length: ")[1:]]
    assert sorted(json.loads(body)["id"] for body in bodies) == list(range(50))
    assert_conforming([ping(i) for i in range(50)], [json.loads(body) for body in bodies])


def ping_into(path: str) -> subprocess.CompletedProcess[bytes]:
    """Run the server with stdout opened on `path`, send one ping, close stdin."""
    with open(path, "wb") as stdout:
        return subprocess.run(  # noqa: TID251 - a one-shot command, no event loop here
            [server_executable()],
            input=json.dumps(ping(1)).encode() + b"\n",
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=60,
        )


def test_devices_the_loop_cannot_poll_work_as_stdin_and_stdout() -> None:
    # epoll refuses /dev/null; the server must still see end of input at once.
    with open(os.devnull, "rb") as stdin:
        done = subprocess.run(  # noqa: TID251 - a one-shot command, no event loop here
            [server_executable()], stdin=stdin, capture_output=True, timeout=60
        )
    assert (done.returncode, done.stdout) == (0, b"")
    done = ping_into(os.devnull)
    assert done.returncode == 0 and b"Traceback" not in done.stderr


def test_a_full_device_as_stdout_is_reported_and_the_server_still_exits_0() -> None:
    done = ping_into("/dev/full")
    assert done.returncode == 0
    assert b"cannot write to stdout" in done.stderr and b"Traceback" not in done.stderr


def test_shell_redirection_example_from_the_readme_works(tmp_path: Path) -> None:
    requests = tmp_path / "requests.ndjson"
    requests.write_text(json.dumps(ping(1)) + "\n")
    done = subprocess.run(  # noqa: TID251 - exercising the shell line a user would type
        f"{server_executable()} < requests.ndjson > replies.ndjson",
        shell=True,
        cwd=tmp_path,
        timeout=60,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "replies.ndjson").read_text())["result"]["pong"] is True


async def test_a_terminal_works_and_is_left_blocking() -> None:
    controller, terminal = pty.openpty()
    attributes = termios.tcgetattr(terminal)
    attributes[3] &= ~termios.ECHO  # do not echo our requests back at us
    termios.tcsetattr(terminal, termios.TCSANOW, attributes)
    try:
        async with running_server(stdin=terminal, stdout=terminal) as server:
            os.write(controller, json.dumps(ping(1)).encode() + b"\n")
            reply = await asyncio.wait_for(asyncio.to_thread(_read_line, controller), 20)
            assert json.loads(reply)["result"]["pong"] is True
            os.write(controller, b"\x04")  # end of input, as a user's Ctrl-D
            assert await asyncio.wait_for(server.proc.wait(), EXIT_TIMEOUT_S) == 0
        # The server shared our terminal; it must not leave it non-blocking.
        assert os.get_blocking(terminal)
    finally:
        os.close(controller)
        os.close(terminal)


def _read_line(fd: int) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        data += os.read(fd, 4096)
    return data


async def test_a_client_that_stops_reading_stdout_ends_the_server() -> None:
    async with running_server() as server:
        assert server.proc.stdout is not None
        read_end = server.proc._transport.get_pipe_transport(1)  # type: ignore[attr-defined]
        read_end.close()  # our end of the server's stdout is gone
        await server.send(ping(1))  # its answer meets a broken pipe
        assert await asyncio.wait_for(server.proc.wait(), EXIT_TIMEOUT_S) == 0


async def test_a_client_closing_stdout_mid_stream_costs_a_few_log_lines_none_repeated() -> None:
    flood = [sys.executable, str(FAKES / "flood.py"), "50"]  # far more than any pipe holds
    async with running_server() as server:
        spawn = {"command": flood, "stream": True}
        server.run_ids.add((await result_of(server, "spawn", spawn))["runId"])
        read_end = server.proc._transport.get_pipe_transport(1)  # type: ignore[attr-defined]
        read_end.pause_reading()  # a client that stops reading, then goes away
        # A burst of requests too, so that many replies are on their way at once.
        # Not drained: a server whose replies wait stops reading its stdin.
        assert server.proc.stdin is not None
        server.proc.stdin.write(b"".join(json.dumps(ping(i)).encode() + b"\n" for i in range(3000)))
        await until_pipe_full(read_end.get_extra_info("pipe").fileno())
        read_end.close()  # mid-stream: every message still to come meets a broken pipe
        assert await asyncio.wait_for(server.proc.wait(), EXIT_TIMEOUT_S) == 0
        await asyncio.wait_for(server._stderr_task, EXIT_TIMEOUT_S)
        # Each line without its timestamp: what was said, by whom, at what level.
        said = [line.split(" ", 2)[-1] for line in server.stderr_text.splitlines()]
        assert len(said) <= 3, server.stderr_text
        assert len(set(said)) == len(said), server.stderr_text


async def until_pipe_full(fd: int) -> None:
    """Until the server's output backs up in the pipe we stopped reading (polled, bounded)."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:  # a pipe's fill level changes without telling anyone: poll it
            waiting = array.array("i", [0])
            fcntl.ioctl(fd, termios.FIONREAD, waiting)
            if waiting[0] >= PIPE_BACKED_UP:
                return
            await asyncio.sleep(0.01)


async def one_ping(*argv: str, msg_id: int) -> tuple[int, bytes, bytes]:
    """Run `argv` as a server, send one ping, close stdin: exit status, stdout, stderr."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(
        proc.communicate(json.dumps(ping(msg_id)).encode() + b"\n"), EXIT_TIMEOUT_S
    )
    assert_nothing_left(proc.pid)
    assert proc.returncode is not None
    return proc.returncode, out, err


async def test_python_dash_m_serves_like_the_console_script() -> None:
    code, out, err = await one_ping(sys.executable, "-m", "subagent_host", "serve", msg_id=5)
    assert code == 0, err
    assert json.loads(out)["id"] == 5


async def test_stray_prints_cannot_reach_the_wire() -> None:
    # fd 1 points at stderr while serving; whatever writes there misses the protocol.
    noisy_server = (
        "import os, sys\n"
        "import subagent_host.handlers.ping as p\n"
        "orig = p.handle\n"
        "def noisy(params, ctx):\n"
        "    print('stray print'); os.write(1, b'stray write\\n')\n"
        "    return orig(params, ctx)\n"
        "import subagent_host.handlers.table as t\n"
        "t.METHODS = {'ping': t.METHODS['ping']._replace(handler=noisy)}\n"
        "sys.argv = ['subagent-host']\n"
        "from subagent_host.cli import main\n"
        "raise SystemExit(main())\n"
    )
    code, out, err = await one_ping(sys.executable, "-c", noisy_server, msg_id=1)
    assert code == 0, err
    assert json.loads(out)["result"]["pong"] is True  # stdout holds exactly one JSON text
    assert b"stray print" in err and b"stray write" in err
