"""Route `subagent-host <subcommand> ...` to the subcommand's module (imported here only)."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sequence
from typing import cast

from subagent_host.terminal import COMMANDS


def main(name: str, argv: Sequence[str]) -> int:
    """Run subcommand `name` with the arguments after it; its exit status."""
    assert name in COMMANDS, name
    # Stderr is the person's: log records of the code a subcommand loads (the client
    # library, the store) never reach it through Python's last resort. Each subcommand
    # says what went wrong in its own words; `run` keeps its server's log in a file.
    logging.getLogger().handlers[:] = [logging.NullHandler()]
    module = importlib.import_module(f"subagent_host.terminal.{name}")
    return cast(Callable[[Sequence[str]], int], module.main)(argv)
