"""`subagent-host mcp [serve options]`: the MCP face on stdio (protocol.md §22).

The options are `serve`'s (but `--framing`), checked by the same code, and handed to
the `serve` child as they are: the same state directory, session, configuration,
agent definitions and limits. Without the `mcp` extra it says so in one line and
exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import signal
import sys
from collections.abc import Sequence
from typing import Final

from subagent_host import SERVER_NAME
from subagent_host.command_line import add_serve_options, parse_config
from subagent_host.options import OneLineParser
from subagent_host.server_process import server_command, start_server_process

PROG: Final = f"{SERVER_NAME} mcp"  # as mcp_face/server.py names it
EXIT_USAGE: Final = 2
SDK_PACKAGES: Final = ("mcp", "mcp_types")  # the `mcp` extra's top-level packages
MISSING_SDK: Final = (
    f"{PROG}: the MCP face needs the official MCP SDK, an optional extra: "
    f"pip install '{SERVER_NAME}[mcp]'"
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Serve MCP (Model Context Protocol) on stdin/stdout: the tools spawn, "
        "wait, status, stop, send, interrupt, close and agents_list, for an MCP client such "
        "as Claude Code or Codex. "
        "Runs go through a 'subagent-host serve' this command starts with the options "
        "below; when the client closes stdin or exits, every run it started is stopped.",
    )
    add_serve_options(parser, framing=False)
    return parser


def main(argv: Sequence[str]) -> int:
    build_parser().parse_args(argv)  # a bad option: one line, exit 2
    # A safety setting that cannot be read: serve's one line and exit 2, here, rather
    # than an MCP server whose every tool call fails (protocol.md §19).
    parse_config(argv)
    if not all(importlib.util.find_spec(name) for name in SDK_PACKAGES):
        print(MISSING_SDK, file=sys.stderr)  # before anything starts
        return EXIT_USAGE
    # A signal ends this process at once (no KeyboardInterrupt mid-way): its serve child
    # then sees the end of its input and stops every run (protocol.md §22).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return asyncio.run(_start_and_serve(argv))


async def _start_and_serve(argv: Sequence[str]) -> int:
    """Start the serve child first of all, then import the SDK (about half a second)
    while it starts: the client's `initialize` waits for the longer of the two, not both."""
    # NDJSON whatever the configuration files say: it is what `Host` speaks.
    command = server_command(["--framing", "ndjson", *argv])
    process = await start_server_process(command, own_session=True)
    try:
        from subagent_host.mcp_face.server import serve
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):  # already gone is fine
            process.kill()  # the one process started here: nothing would end it now
        await process.wait()
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        if (missing or "").partition(".")[0] in SDK_PACKAGES:
            print(MISSING_SDK, file=sys.stderr)  # an SDK found but not whole
            return EXIT_USAGE
        raise
    return await serve(process)
