"""How `run -i` asks about a tool use and which option a typed answer sends; and the
lines it reads from stdin without blocking (a pipe, a file, a closed descriptor)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Final

import pytest

from subagent_host.terminal import permission_prompt
from subagent_host.terminal.line_input import LineInput
from subagent_host.values.choices import OptionKind, ToolKind
from subagent_host.values.interaction import PendingPermission, PermissionOption

CLAUDE_OPTIONS: Final = (
    PermissionOption("allow-once", "Allow once", OptionKind.ALLOW_ONCE),
    PermissionOption("allow-always", "Allow always in this session", OptionKind.ALLOW_ALWAYS),
    PermissionOption("reject-once", "Reject", OptionKind.REJECT_ONCE),
    PermissionOption("reject-always", "Reject always", OptionKind.REJECT_ALWAYS),
)


def asked(summary: str = "printf x > written.txt", **fields: object) -> PendingPermission:
    values: dict[str, object] = {
        "index": 0,
        "permission_id": "0.p1",
        "name": "Bash",
        "kind": ToolKind.EXECUTE,
        "summary": summary,
        "options": CLAUDE_OPTIONS,
        **fields,
    }
    return PendingPermission(**values)  # type: ignore[arg-type]


def test_the_tool_is_described_by_its_kind_name_and_summary_without_escapes() -> None:
    assert permission_prompt.describe(asked()) == "? execute Bash: printf x > written.txt"
    hostile = asked("rm -rf x\x1b[2J\nand more", name="Bash\x07")
    assert permission_prompt.describe(hostile) == "? execute Bash: rm -rf x and more"
    assert permission_prompt.describe(asked("")) == "? execute Bash"


def test_each_key_answers_with_the_first_option_of_its_kind() -> None:
    permission = asked()
    assert permission_prompt.question(permission) == (
        "[y] allow once  [a] allow always  [n] reject? "
    )
    picks = {line: permission_prompt.chosen(permission, line) for line in ("y", " A\n", "no")}
    assert {line: o and o.option_id for line, o in picks.items()} == {
        "y": "allow-once",
        " A\n": "allow-always",
        "no": "reject-once",
    }
    assert permission_prompt.chosen(permission, "maybe") is None
    assert permission_prompt.chosen(permission, "") is None
    refused = permission_prompt.refusal(permission)
    assert refused is not None and refused.option_id == "reject-once"


def test_only_the_keys_of_options_offered_are_named() -> None:
    permission = asked(options=(PermissionOption("deny", "Deny", OptionKind.REJECT_ALWAYS),))
    assert permission_prompt.question(permission) == "[n] reject? "
    assert permission_prompt.chosen(permission, "y") is None
    chosen = permission_prompt.chosen(permission, "n")
    assert chosen is not None and chosen.option_id == "deny"


async def test_lines_come_from_a_pipe_as_they_are_written_and_none_at_its_end() -> None:
    read_end, write_end = os.pipe()
    try:
        lines = LineInput(read_end)
        first = asyncio.ensure_future(lines.line())
        os.write(write_end, b"hel")
        await asyncio.sleep(0)  # a turn of the loop: half a line is no line
        assert not first.done()
        os.write(write_end, "lo wörld\r\nnext\nlast".encode())
        async with asyncio.timeout(10):
            assert await first == "hello wörld"
            assert await lines.line() == "next"
            os.close(write_end)
            write_end = -1
            assert await lines.line() == "last"
            assert await lines.line() is None and lines.ended
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


async def test_a_wait_given_up_keeps_what_was_read_for_the_next_line() -> None:
    read_end, write_end = os.pipe()
    try:
        lines = LineInput(read_end)
        os.write(write_end, b"par")
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await lines.line()
        os.write(write_end, b"tial\n")
        async with asyncio.timeout(10):
            assert await lines.line() == "partial"
    finally:
        os.close(read_end)
        os.close(write_end)


async def test_a_regular_file_and_a_closed_descriptor_are_read_to_their_end(
    tmp_path: Path,
) -> None:
    path = tmp_path / "input"
    path.write_bytes(b"one\ntwo\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        lines = LineInput(fd)
        assert [await lines.line(), await lines.line(), await lines.line()] == ["one", "two", None]
    finally:
        os.close(fd)
    closed = os.open(path, os.O_RDONLY)
    os.close(closed)
    assert await LineInput(closed).line() is None
