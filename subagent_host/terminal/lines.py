"""A child's text cut into whole lines as it comes, for views that print line by line
(`logs`, `run` on a terminal): a line is printed once its newline has come, so that lines
of several children or of two streams never mix, and a status line drawn below is never
torn through one."""

from __future__ import annotations


class OpenLines:
    """Several streams of text (one per key: a child's index, a stream), each cut into
    whole lines; each stream's unfinished line is held until its newline comes.

    The unfinished line is held in pieces, joined once it ends: a long line costs what
    its length costs, not its length squared. With `limit`, a line that holds `limit`
    characters is given as a line of its own before its end has come.
    """

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        self._pieces: dict[int, list[str]] = {}
        self._chars: dict[int, int] = {}

    def feed(self, key: int, text: str) -> list[str]:
        """The lines `text` ends (without their newlines), the held start of the first
        one joined to it; the rest of it is held."""
        first, newline, rest = text.partition("\n")
        if not newline:
            return self._hold(key, text)
        lines = [(self.take(key) or "") + first, *rest.split("\n")]
        tail = lines.pop()
        return lines + self._hold(key, tail)

    def take(self, key: int) -> str | None:
        """The stream's unfinished line, no longer held; None when it holds none."""
        pieces = self._pieces.pop(key, None)
        self._chars.pop(key, None)
        return None if pieces is None else "".join(pieces)

    def keys(self) -> list[int]:
        """The streams that hold an unfinished line."""
        return list(self._pieces)

    def _hold(self, key: int, text: str) -> list[str]:
        if not text:
            return []
        self._pieces.setdefault(key, []).append(text)
        self._chars[key] = self._chars.get(key, 0) + len(text)
        if self._limit is not None and self._chars[key] >= self._limit:
            return [self.take(key) or ""]
        return []
