"""Route `subagent-host <subcommand> ...` to the subcommand's module (imported here only)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import cast

from subagent_host.terminal import COMMANDS


def main(name: str, argv: Sequence[str]) -> int:
    """Run subcommand `name` with the arguments after it; its exit status."""
    assert name in COMMANDS, name
    module = importlib.import_module(f"subagent_host.terminal.{name}")
    return cast(Callable[[Sequence[str]], int], module.main)(argv)
