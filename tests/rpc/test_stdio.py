"""The output stream over a real pipe whose reader goes away: what reaches the log."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest

from subagent_host.rpc.stdio import open_output

WAIT_S = 5.0


async def test_writes_after_the_reader_is_gone_are_dropped_without_a_warning_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    read_fd, write_fd = os.pipe()
    try:
        output = await open_output(write_fd)
        os.close(read_fd)  # the client is gone before the server writes
        with caplog.at_level(logging.DEBUG):
            # As a burst of replies in one turn of the loop: the first meets EPIPE,
            # and asyncio closes the transport at once but says so a turn later.
            for _ in range(100):
                output.write(b"x" * 1024)
            assert output.is_broken
            await asyncio.wait_for(output.wait_broken(), WAIT_S)
            output.write(b"late")
            await asyncio.wait_for(output.aclose(), WAIT_S)
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert warnings == []
        said = [r.getMessage() for r in caplog.records]
        assert said == ["stdout closed: [Errno 32] Broken pipe"]
    finally:
        os.close(write_fd)
