"""The control socket's listener and its client's checks, in one process (rpc/control.py,
client/control.py): who may connect, what is trusted, how a bad message is answered."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from subagent_host.client.control import (
    ControlBusy,
    ControlUnreachable,
    connect_control,
    stop_at,
)
from subagent_host.rpc.control import MAX_CONNECTIONS, ControlListener, remove_stale
from subagent_host.rpc.control_socket import UntrustedSocket, reachable, socket_path
from subagent_host.rpc.dispatch import Method
from subagent_host.rpc.wire import PingParams, RunList


def _table() -> dict[str, Method]:
    return {"ping": Method(PingParams, lambda _params: RunList(runs=()))}


@pytest.fixture
async def listening(tmp_path: Path) -> AsyncIterator[ControlListener]:
    listener = ControlListener(socket_path(tmp_path, "a" * 32), _table, 1 << 20)
    await listener.start()
    try:
        yield listener
    finally:
        await listener.aclose()


async def _exchange(path: Path, data: bytes, replies: int) -> list[Any]:
    with reachable(path) as name:
        reader, writer = await asyncio.open_unix_connection(name)
    writer.write(data)
    await writer.drain()
    try:
        async with asyncio.timeout(10):
            return [json.loads(await reader.readuntil(b"\n")) for _ in range(replies)]
    finally:
        writer.close()


async def test_the_socket_is_private_to_its_user_and_gone_once_the_listener_closes(
    tmp_path: Path,
) -> None:
    listener = ControlListener(socket_path(tmp_path, "b" * 32), _table, 1 << 20)
    await listener.start()
    assert stat.S_IMODE(listener.path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(listener.path.stat().st_mode) == 0o600
    assert listener.path.is_socket()
    await listener.aclose()
    assert not listener.path.exists()


async def test_a_malformed_control_message_is_answered_and_the_next_one_still_is(
    listening: ControlListener,
) -> None:
    replies = await _exchange(
        listening.path, b'{bad\n{"jsonrpc":"2.0","id":7,"method":"ping"}\n', replies=2
    )
    assert replies[0]["error"]["code"] == -32700 and replies[0]["id"] is None
    assert replies[1] == {"jsonrpc": "2.0", "id": 7, "result": {"runs": []}}


async def test_a_method_the_control_socket_does_not_offer_is_method_not_found(
    listening: ControlListener,
) -> None:
    replies = await _exchange(
        listening.path, b'{"jsonrpc":"2.0","id":1,"method":"spawn","params":{}}\n', replies=1
    )
    assert replies[0]["error"]["code"] == -32601


async def test_a_peer_of_another_uid_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    # No second user here: the listener is told ours is not the uid allowed.
    listener = ControlListener(
        socket_path(tmp_path, "c" * 32), _table, 1 << 20, uid=os.getuid() + 1
    )
    await listener.start()
    try:
        with reachable(listener.path) as name:
            reader, writer = await asyncio.open_unix_connection(name)
        writer.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        async with asyncio.timeout(10):
            try:
                assert await reader.read() == b""  # closed, unanswered
            except ConnectionResetError:
                pass  # closed with the request unread: as unanswered
        writer.close()
    finally:
        await listener.aclose()


async def test_a_long_state_directory_path_still_gets_a_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    listener = ControlListener(socket_path(deep, "f" * 32), _table, 1 << 20)
    await listener.start()
    try:
        host = await connect_control(listener.path, pid=os.getpid())
        async with host:
            assert await host.request("ping") == {"runs": []}
    finally:
        await listener.aclose()


async def test_the_client_trusts_a_socket_only_of_the_expected_server_process(
    listening: ControlListener,
) -> None:
    host = await connect_control(listening.path, pid=os.getpid())
    await host.aclose()
    with pytest.raises(UntrustedSocket, match="not server pid 1"):
        await connect_control(listening.path, pid=1)


async def test_the_client_trusts_no_regular_file_no_open_directory_and_no_symlink(
    tmp_path: Path, listening: ControlListener
) -> None:
    directory = tmp_path / "control"
    plain = directory / "plain.sock"
    plain.write_bytes(b"")
    with pytest.raises(UntrustedSocket, match="is not a socket"):
        await connect_control(plain, pid=os.getpid())
    link = directory / "link.sock"
    link.symlink_to(listening.path)
    with pytest.raises(UntrustedSocket, match="is not a socket"):
        await connect_control(link, pid=os.getpid())
    directory.chmod(0o755)
    try:
        with pytest.raises(UntrustedSocket, match="open to others"):
            await connect_control(listening.path, pid=os.getpid())
    finally:
        directory.chmod(0o700)


async def test_a_socket_that_is_not_there_is_unreachable_not_untrusted(tmp_path: Path) -> None:
    with pytest.raises(ControlUnreachable, match="there is no"):
        await connect_control(socket_path(tmp_path, "8" * 32), pid=os.getpid())


async def test_a_socket_nobody_listens_on_is_unreachable(tmp_path: Path) -> None:
    path = socket_path(tmp_path, "9" * 32)
    path.parent.mkdir(mode=0o700)
    left = socket.socket(socket.AF_UNIX)
    with reachable(path) as name:
        left.bind(name)  # bound, never listening, closed: what a killed server leaves
    left.close()
    path.chmod(0o600)
    with pytest.raises(ControlUnreachable):
        await connect_control(path, pid=os.getpid())


async def test_sockets_of_server_instances_no_longer_alive_are_removed(tmp_path: Path) -> None:
    directory = tmp_path / "control"
    directory.mkdir(mode=0o700)
    for name in ("live", "dead"):
        left = socket.socket(socket.AF_UNIX)
        with reachable(directory / f"{name}.sock") as short:
            left.bind(short)
        left.close()
    (directory / "notes.txt").write_text("kept")
    made = (directory / "dead.sock").stat().st_mtime
    assert remove_stale(directory, {"live"}, made_before=made) == 0  # too young to be sure
    assert remove_stale(directory, {"live"}, made_before=made + 1) == 1
    assert sorted(p.name for p in directory.iterdir()) == ["live.sock", "notes.txt"]


async def test_closing_the_listener_does_not_wait_for_a_client_that_stays_silent(
    tmp_path: Path,
) -> None:
    listener = ControlListener(socket_path(tmp_path, "e" * 32), _table, 1 << 20)
    await listener.start()
    with reachable(listener.path) as name:
        reader, writer = await asyncio.open_unix_connection(name)
    writer.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')  # answered, then silence
    async with asyncio.timeout(10):
        assert json.loads(await reader.readline())["id"] == 1
    async with asyncio.timeout(2):  # well under the idle limit and the close timeout
        await listener.aclose()
    assert await reader.read() == b""
    writer.close()


async def test_sockets_other_instances_left_are_swept_once_the_listener_listens(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "control"
    directory.mkdir(mode=0o700)
    left = socket.socket(socket.AF_UNIX)
    with reachable(directory / "dead.sock") as name:
        left.bind(name)
    left.close()
    os.utime(directory / "dead.sock", (0, 0))  # left long ago
    swept = asyncio.Event()

    async def live() -> set[str]:
        swept.set()
        return set()

    listener = ControlListener(socket_path(tmp_path, "f" * 32), _table, 1 << 20)
    await listener.start(live=live)
    await listener.aclose()  # waits for the sweep
    assert swept.is_set()
    assert not (directory / "dead.sock").exists()


async def test_a_connection_beyond_the_bound_is_told_the_server_is_busy(
    listening: ControlListener,
) -> None:
    held = []
    for _ in range(MAX_CONNECTIONS):
        with reachable(listening.path) as name:
            reader, writer = await asyncio.open_unix_connection(name)
        writer.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')  # answered: held
        async with asyncio.timeout(10):
            assert json.loads(await reader.readline())["id"] == 1
        held.append(writer)

    with pytest.raises(ControlBusy) as busy:
        async with asyncio.timeout(10):
            await stop_at(listening.path, pid=os.getpid(), run_id="0" * 32, grace_ms=0, reason=None)

    assert str(busy.value) == (
        f"busy: {MAX_CONNECTIONS} control connections are open, at most {MAX_CONNECTIONS}"
    )
    for writer in held:
        writer.close()
