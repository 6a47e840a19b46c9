"""Keys read from a terminal: arrows in both cursor modes, Enter, a lone Escape, letters."""

from __future__ import annotations

import os
import pty
import termios

import pytest

from subagent_host.terminal.keys import Key, cbreak, decode


def test_arrows_enter_escape_and_letters_are_read_as_keys() -> None:
    assert decode(b"\x1b[A\x1bOB\r\nqs") == [
        Key.UP,
        Key.DOWN,
        Key.ENTER,
        Key.ENTER,
        Key.QUIT,
        Key.STOP,
    ]
    assert decode(b"\x1b") == [Key.ESCAPE]
    assert decode(b"kj") == [Key.UP, Key.DOWN]


def test_sequences_of_other_keys_are_one_other_key_each_not_read_as_letters() -> None:
    # Ctrl-Up, F5, Alt-s, PageDown: none of their bytes is an `s` or a `q` of its own.
    assert decode(b"\x1b[1;5A\x1b[15~\x1bs\x1b[6~q") == [Key.OTHER] * 4 + [Key.QUIT]
    assert decode(b"xyYz") == [Key.OTHER, Key.YES, Key.YES, Key.OTHER]
    assert decode("é n".encode()) == [Key.OTHER] * 3


def test_cbreak_gives_the_terminal_its_settings_back_after_an_exception() -> None:
    leader, follower = pty.openpty()
    try:
        before = termios.tcgetattr(follower)
        assert before[3] & termios.ICANON and before[3] & termios.ECHO
        with pytest.raises(RuntimeError), cbreak(follower):
            during = termios.tcgetattr(follower)
            assert not during[3] & (termios.ICANON | termios.ECHO)
            raise RuntimeError("a bug while keys are read")
        assert termios.tcgetattr(follower) == before
    finally:
        os.close(leader)
        os.close(follower)
