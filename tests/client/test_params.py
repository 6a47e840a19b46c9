"""A string where the wire wants an array of strings is refused at the call, in the server's
own words, and never sent split into letters."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagent_host.client import Host
from subagent_host.client.errors import InvalidParams
from subagent_host.rpc.wire import SpawnItem
from tests.client.conftest import memory_streams, started


async def test_a_string_command_is_refused_with_the_servers_own_message(tmp_path: Path) -> None:
    async with started(tmp_path) as (host, seen):
        with pytest.raises(InvalidParams) as from_wire:
            await host.request("spawn", {"command": "echo hi"})  # the server's own answer
        sent = len(seen.messages)
        with pytest.raises(InvalidParams) as at_the_call:
            await host.spawn(command="echo hi")  # type: ignore[arg-type]
        assert (at_the_call.value.code, at_the_call.value.message) == (
            from_wire.value.code,
            from_wire.value.message,
        )
        assert at_the_call.value.data == from_wire.value.data
        assert from_wire.value.message == (
            "invalid params: command: expected an array of strings, got a string"
        )
        assert len(seen.messages) == sent  # nothing went out, so nothing came back
        assert (await host.status()).runs == ()


@pytest.mark.parametrize(
    ("params", "path", "message"),
    [
        ({"tasks": (SpawnItem(command="echo hi"),)}, "tasks[0].command", "got a string"),  # type: ignore[arg-type]
        ({"command": ("echo",), "tools": "read"}, "tools", "got a string"),
        ({"command": ("echo", 3)}, "command", "item 1: expected a string, got a number"),
    ],
)
async def test_a_misfit_in_any_field_is_refused_before_anything_is_sent(
    params: dict[str, object], path: str, message: str
) -> None:
    reader, writer = memory_streams()
    async with Host.connect(reader, writer) as host:
        with pytest.raises(InvalidParams) as refused:
            await host.spawn(**params)  # type: ignore[arg-type]
    assert writer.data == b""
    [problem] = refused.value.data["errors"]
    assert problem["path"] == path and problem["message"].endswith(message)


async def test_sequences_of_strings_are_sent_whole(tmp_path: Path) -> None:
    async with started(tmp_path) as (host, _seen):
        for command in (("echo", "hi"), ["echo", "hi"]):
            done = await host.spawn(command=command, mode="task")  # type: ignore[arg-type]
            assert done.children[0].output is not None
            assert done.children[0].output.text == "hi\n"
