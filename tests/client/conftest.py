"""Servers for the client's tests: started through the client itself, proven gone after."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from subagent_host.client import Host
from tests.e2e.harness import (
    _run_ids_in,
    assert_no_run_survives,
    assert_nothing_left,
    assert_snapshot_table,
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/client/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(params=["ndjson", "lsp"])
def framing(request: pytest.FixtureRequest) -> str:
    framing: str = request.param
    return framing


class Seen:
    """Every message a client received, and the run ids they named."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.run_ids: set[str] = set()
        self.also: Callable[[Any], None] | None = None

    def __call__(self, message: Any) -> None:
        self.messages.append(message)
        self.run_ids |= _run_ids_in(message)
        if self.also is not None:
            self.also(message)

    def replies(self) -> dict[int, Any]:
        return {m["id"]: m for m in self.messages if isinstance(m, dict) and "id" in m}


@contextlib.asynccontextmanager
async def started(
    tmp_path: Path,
    framing: str = "ndjson",
    *args: str,
    seen: Seen | None = None,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[tuple[Host, Seen]]:
    """A server on a state directory of the test's, through `Host.start` (in `env`, else
    this process's environment); afterwards it has exited, nothing it started survives
    and it logged no traceback."""
    seen = seen or Seen()
    log = tmp_path / f"server-{framing}.log"
    with log.open("ab") as stderr:
        async with Host.start(
            ["--state-dir", str(tmp_path / "state"), *args],
            framing=framing,
            stderr=stderr,
            on_message=seen,
            env=env,
        ) as host:
            yield host, seen
    assert host.process is not None and host.process.returncode is not None
    assert_nothing_left(host.process.pid)
    assert_no_run_survives(seen.run_ids)
    for message in seen.messages:
        for item in message if isinstance(message, list) else [message]:
            if "result" in item and isinstance(item["result"], dict) and "runId" in item["result"]:
                assert_snapshot_table(item["result"])
    assert "Traceback" not in log.read_text(), log.read_text()


async def first_run_id(seen: Seen) -> str:
    """The id of the first run a `run/event` named (a task-mode spawn's come before its reply)."""
    found: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def look(message: Any) -> None:
        if isinstance(message, dict) and message.get("method") == "run/event":
            if not found.done():
                found.set_result(message["params"]["runId"])

    seen.also = look
    for message in seen.messages:
        look(message)
    async with asyncio.timeout(20):
        return await found


class MemoryWriter:
    """A writer that keeps what it is given (`Host.connect` over streams of a test's own);
    closing it ends `reader`, as a server ends its output when its input ends."""

    def __init__(self, reader: asyncio.StreamReader | None = None) -> None:
        self.data = b""
        self._reader = reader

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        if self._reader is not None and not self._reader.at_eof():
            self._reader.feed_eof()

    async def wait_closed(self) -> None:
        pass


def memory_streams() -> tuple[asyncio.StreamReader, MemoryWriter]:
    reader = asyncio.StreamReader()
    return reader, MemoryWriter(reader)
