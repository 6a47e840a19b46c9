"""The `subagent-host` entry point (protocol.md §7): routes the first word to `serve`,
`schema` or a face (`mcp`, `conformance`, the terminal's subcommands).

The options and the configuration they select are `command_line`'s; the option values
are `options`'. Nothing imports this module but `__main__`.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from subagent_host import SERVER_NAME
from subagent_host.command_line import SUBCOMMANDS, parse_config, unknown_command
from subagent_host.options import OneLineParser
from subagent_host.terminal import COMMANDS as TERMINAL_COMMANDS

if TYPE_CHECKING:
    from subagent_host.config import ServerConfig

logger = logging.getLogger(__name__)


def build_schema_parser() -> argparse.ArgumentParser:
    """`subagent-host schema`: no options; its --help says what it prints."""
    return OneLineParser(
        prog=f"{SERVER_NAME} schema",
        description="Print the protocol's OpenRPC 1.3 document (JSON) on stdout, generated "
        "from the wire types: every method, its params, its result and its errors.",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `subagent-host` and `python -m subagent_host`.

    The server itself (pygls, the app, psutil, sqlite3) is imported only once
    the command line says to serve: `--version`, `--help` and a bad option
    answer without it.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    # At exit, whatever is loaded stays loaded to the end: frozen, it is skipped by the
    # interpreter's last collection, which would otherwise walk every object of every
    # module (tens of milliseconds of each command's end).
    atexit.register(gc.freeze)
    if args[:1] == ["conformance"]:
        # The harness is a client of servers: its code is loaded for this subcommand only.
        from subagent_host.conformance.command import main as conformance

        return conformance(args[1:])
    if args[:1] == ["mcp"]:
        # The MCP face is a client of a server it starts: its code (and the optional SDK)
        # is loaded for this subcommand only.
        from subagent_host.mcp_face.command import main as mcp_face

        return mcp_face(args[1:])
    if args[:1] and args[0] in TERMINAL_COMMANDS:
        # Commands for a person at a terminal: clients of the core, loaded only when asked for.
        from subagent_host.terminal.command import main as terminal

        return terminal(args[0], args[1:])
    # Before anything opens a file: a closed fd 0 or 1 would be handed to the
    # next file opened, and the server would take that file for its client.
    closed = [name for fd, name in ((0, "stdin"), (1, "stdout")) if not _is_open(fd)]
    if args[:1] == ["schema"]:
        build_schema_parser().parse_args(args[1:])
        return _print_schema()
    if args[:1] and not args[0].startswith("-") and args[0] not in SUBCOMMANDS:
        print(
            f"{SERVER_NAME}: {unknown_command(args[0])} (see '{SERVER_NAME} --help')",
            file=sys.stderr,
        )
        return 2
    config, warning = parse_config(args)
    if closed:
        print(f"{SERVER_NAME}: {' and '.join(closed)} closed: nothing to serve", file=sys.stderr)
        return 2
    from subagent_host.state_layout import state_dir_problem

    if (problem := state_dir_problem(config.state_dir)) is not None:
        print(f"{SERVER_NAME}: the state directory is not safe to use: {problem}", file=sys.stderr)
        return 2
    from subagent_host.logs import LogFileIsTheWire, configure_logging

    try:
        configure_logging(config.log_level, config.log_file, config.log_format)
    except OSError as exc:
        print(f"{SERVER_NAME}: cannot open log file: {exc}", file=sys.stderr)
        return 2
    except LogFileIsTheWire as exc:
        print(f"{SERVER_NAME}: {exc}", file=sys.stderr)
        return 2
    if warning:
        logger.warning(warning)
    return _serve(config)


def _serve(config: ServerConfig) -> int:
    """Choose the process tracking and serve: the imports that take most of a start."""
    import asyncio

    from subagent_host.app import serve
    from subagent_host.backends.tracking import TrackingUnavailable
    from subagent_host.backends.tracking import choose as choose_tracking
    from subagent_host.executors.select import unavailable

    try:
        tracking = choose_tracking(config.process_tracking)
    except TrackingUnavailable as exc:
        print(f"{SERVER_NAME}: {exc}", file=sys.stderr)
        return 2
    if (reason := unavailable(config.executor)) is not None:
        print(f"{SERVER_NAME}: {reason}", file=sys.stderr)
        return 2
    logger.info("serving on stdio (process tracking: %s): %s", tracking.mode.value, config)
    return asyncio.run(serve(config, tracking))


def _print_schema() -> int:
    """Print the OpenRPC document (imported only here: the server never loads it)."""
    from subagent_host.openrpc import render

    sys.stdout.write(render())
    return 0


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True
