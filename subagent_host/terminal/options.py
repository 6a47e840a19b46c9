"""Options every terminal subcommand shares with `serve`, and the configuration they select.

`--state-dir`, `--config` and `--trust-project` mean what they mean for `serve`
(protocol.md §7), and are resolved by the same code (`command_line.parse_config`): a subcommand
sees the state directory a server started with the same options would use.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from subagent_host import SERVER_NAME
from subagent_host.command_line import parse_config
from subagent_host.options import (
    OneLineParser,
    add_trust_project,
    examining,
    existing_file,
    state_directory,
)

if TYPE_CHECKING:
    from subagent_host.config import ServerConfig


def subcommand_parser(
    name: str, description: str, *, state_dir: Callable[[str], Path] = state_directory
) -> argparse.ArgumentParser:
    """A parser for `subagent-host NAME` with the shared options already added; `state_dir`
    reads `--state-dir` (by default as `serve` does: a path that is not a directory is
    refused)."""
    parser = OneLineParser(prog=f"{SERVER_NAME} {name}", description=description)
    add_server_options(parser, state_dir=state_dir)
    return parser


def any_path(text: str) -> Path:
    """A `--state-dir` taken as it is, to be examined rather than refused (`doctor`)."""
    with examining(text):
        return Path(text).expanduser().resolve()


def add_server_options(
    parser: argparse.ArgumentParser, *, state_dir: Callable[[str], Path] = state_directory
) -> None:
    parser.add_argument(
        "--state-dir",
        type=state_dir,
        metavar="DIR",
        help="the server's state directory (default: as for serve)",
    )
    parser.add_argument(
        "--config", type=existing_file, metavar="FILE", help="a JSON settings file, as for serve"
    )
    add_trust_project(parser, "trust the project at DIR, as for serve (repeatable)")


def server_arguments(args: argparse.Namespace) -> list[str]:
    """The `serve` options that select the same state, configuration and trust."""
    argv: list[str] = []
    if args.state_dir is not None:
        argv += ["--state-dir", str(args.state_dir)]
    if args.config is not None:
        argv += ["--config", str(args.config)]
    for directory in args.trust_project:
        argv += ["--trust-project", str(directory)]
    return argv


def server_config(args: argparse.Namespace) -> ServerConfig:
    """The configuration `serve` would run with under these options."""
    config, _warning = parse_config(server_arguments(args))
    return config


def state_dir_of(args: argparse.Namespace) -> Path:
    return server_config(args).state_dir


def add_run_argument(parser: argparse.ArgumentParser, *, newest_by_default: bool) -> None:
    """RUN: a run id or a prefix of at least 8 characters, of any session; optional where
    the newest run is what a person most likely means (`show`, `logs`)."""
    help_text = "a run id, or a prefix of one (8+ characters)"
    if newest_by_default:
        parser.add_argument(
            "run", metavar="RUN", nargs="?", help=f"{help_text}; default: the newest run"
        )
    else:
        parser.add_argument("run", metavar="RUN", help=help_text)
