"""Route `subagent-host <subcommand> ...` to the subcommand's module (imported here only)."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import cast

from subagent_host.terminal import COMMANDS


def main(name: str, argv: Sequence[str]) -> int:
    """Run subcommand `name` with the arguments after it; its exit status."""
    assert name in COMMANDS, name
    _fill_closed_stdio()
    # Stderr is the person's: log records of the code a subcommand loads (the client
    # library, the store) never reach it through Python's last resort. Each subcommand
    # says what went wrong in its own words; `run` keeps its server's log in a file.
    logging.getLogger().handlers[:] = [logging.NullHandler()]
    module = importlib.import_module(f"subagent_host.terminal.{name}")
    return cast(Callable[[Sequence[str]], int], module.main)(argv)


def _fill_closed_stdio() -> None:
    """A standard stream the shell closed (`2>&-`) is taken as /dev/null: nothing the
    subcommand writes there is seen, as asked, and the next file it opens (a log, a
    pipe to its server) cannot take that descriptor and receive what was meant for it."""
    for fd, name, mode in (
        (0, "stdin", os.O_RDONLY),
        (1, "stdout", os.O_WRONLY),
        (2, "stderr", os.O_WRONLY),
    ):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, mode)
            if opened != fd:  # a lower descriptor was closed too: it was filled first
                os.dup2(opened, fd)
                os.close(opened)
            setattr(sys, name, open(fd, "r" if name == "stdin" else "w", closefd=False))
