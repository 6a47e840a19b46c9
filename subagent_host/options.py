"""Option values of the command line: each is read and checked here, and a bad one is
told in one line (exit 2) before anything is served (protocol.md §7).

`serve`, `mcp` and the terminal's subcommands build their options from these, so a
value means the same and is refused alike wherever it is given.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn, TypeVar

from subagent_host.values import SESSION_ID_PATTERN, SESSION_ID_RULE

T = TypeVar("T")


def int_in_range(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range ({low}..{high})")
        return value

    parse.__name__ = "integer"
    return parse


def add_number(
    parser: argparse.ArgumentParser,
    flag: str,
    low: int,
    high: int,
    help: str,
    default: int | None = None,
) -> None:
    """A whole-number option N, refused (exit 2, one line) outside low..high."""
    parser.add_argument(flag, type=int_in_range(low, high), default=default, metavar="N", help=help)


def session_id(text: str) -> str:
    if SESSION_ID_PATTERN.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a valid session id: use {SESSION_ID_RULE}"
        )
    return text


def existing_file(text: str) -> Path:
    with examining(text):
        path = Path(text).expanduser()
        if not path.is_file():
            raise argparse.ArgumentTypeError(f"{text!r} is not a readable file")
        return path.resolve()


def existing_directory(text: str) -> Path:
    with examining(text):
        path = Path(text).expanduser()
        if not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is not a directory")
        return path.resolve()


def state_directory(text: str) -> Path:
    with examining(text):
        path = Path(text).expanduser()
        if path.exists() and not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} exists and is not a directory")
        return path.resolve()


def log_file(text: str) -> Path:
    """The log file's path with its directory resolved and its own name kept: a symlink
    there is judged when the file is opened (`logs.open_log_file`), not followed here."""
    from subagent_host.settings import file_path

    with examining(text):
        given = Path(text).expanduser()
        if given.name in ("", ".", ".."):
            raise argparse.ArgumentTypeError(f"{text!r} is a directory")
        path = file_path(given)
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is a directory")
        if not path.parent.is_dir():
            raise argparse.ArgumentTypeError(f"the directory of {text!r} does not exist")
        return path


@contextlib.contextmanager
def examining(text: str) -> Iterator[None]:
    """A path that cannot be examined (a symlink whose target may not be read, a
    directory we may not search, a loop) is a bad option value, said in one line."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise argparse.ArgumentTypeError(f"{text!r} cannot be examined: {why}") from None


def log_level(text: str) -> str:
    from subagent_host.settings import LOG_LEVELS

    if text.lower() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return text.upper()


class OneLineParser(argparse.ArgumentParser):
    """A bad command line is told in one line that names the option (protocol.md §7), not
    argparse's usage block: the line is what a person reads and what a script logs."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def add_trust_project(parser: argparse.ArgumentParser, help_text: str) -> None:
    """`--trust-project DIR`, repeatable: `serve` and the terminal subcommands take it alike."""
    parser.add_argument(
        "--trust-project",
        type=existing_directory,
        action="append",
        default=[],
        metavar="DIR",
        help=help_text,
    )


def word(text: str) -> str:
    if not text or any(char.isspace() for char in text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-empty word without spaces")
    return text


def first(option: T | None, from_files: T | None, default: T) -> T:
    """The command line's value, else the files', else the default."""
    if option is not None:
        return option
    return from_files if from_files is not None else default


def one_line(text: str) -> str:
    """`text` with its line breaks escaped (a file's path may hold one)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")
