"""Keys read one at a time from a terminal: the terminal put in cbreak mode (no line
editing, no echo) for as long as it is needed, and the bytes read turned into keys.

`cbreak` restores the terminal's own settings however the block ends, an exception
included; signals that end the program must end that block (`watch` turns SIGTERM,
SIGINT and SIGHUP into a normal return) for it to run.
"""

from __future__ import annotations

import contextlib
import enum
import termios
import tty
from collections.abc import Iterator
from typing import Final


class Key(enum.Enum):
    UP = "up"
    DOWN = "down"
    ENTER = "enter"
    ESCAPE = "escape"
    QUIT = "q"
    STOP = "s"
    YES = "y"
    ALLOW = "a"
    """Allow the selected run's oldest pending permission, once (`watch`)."""
    REJECT = "r"
    """Reject it."""
    OTHER = "other"
    """Any key not listed (a letter, F5, Ctrl-Up): what answers a question with no."""


# What a terminal sends for each key: arrows in normal and in application cursor mode.
SEQUENCES: Final = {
    b"\x1b[A": Key.UP,
    b"\x1bOA": Key.UP,
    b"\x1b[B": Key.DOWN,
    b"\x1bOB": Key.DOWN,
    b"k": Key.UP,
    b"j": Key.DOWN,
    b"\r": Key.ENTER,
    b"\n": Key.ENTER,
    b"q": Key.QUIT,
    b"Q": Key.QUIT,
    b"s": Key.STOP,
    b"y": Key.YES,
    b"Y": Key.YES,
    b"a": Key.ALLOW,
    b"r": Key.REJECT,
}
ESCAPE: Final = b"\x1b"


def decode(data: bytes) -> list[Key]:
    """The keys in what one read returned. A lone ESC is the Escape key (a sequence arrives
    whole in one read); a key not listed is `Key.OTHER`, its sequence read whole."""
    keys = []
    at = 0
    while at < len(data):
        for sequence, key in SEQUENCES.items():
            if data.startswith(sequence, at):
                keys.append(key)
                at += len(sequence)
                break
        else:
            if data[at : at + 1] == ESCAPE:
                keys.append(Key.ESCAPE if at + 1 == len(data) else Key.OTHER)
                at += unknown_sequence_length(data, at)
            else:
                keys.append(Key.OTHER)
                at += _char_length(data[at])
    return keys


def unknown_sequence_length(data: bytes, at: int) -> int:
    """The length of the escape sequence starting at `at` (`ESC [ params final`, or ESC and
    one byte), so that its bytes are not read as keys of their own."""
    if data[at + 1 : at + 2] not in (b"[", b"O"):
        return 2 if at + 1 < len(data) else 1
    end = at + 2
    while end < len(data) and not 0x40 <= data[end] <= 0x7E:
        end += 1
    return end + 1 - at


def _char_length(lead: int) -> int:
    """Bytes of the UTF-8 character whose first byte is `lead` (1 for a stray byte): a
    key like `é` is one key."""
    if lead >= 0xF0:
        return 4
    if lead >= 0xE0:
        return 3
    return 2 if lead >= 0xC0 else 1


@contextlib.contextmanager
def cbreak(fd: int) -> Iterator[None]:
    """Keys reach the program as they are typed, unechoed; the terminal's settings are
    put back on the way out, whatever the way."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd, termios.TCSANOW)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
