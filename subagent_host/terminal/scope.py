"""`Scope`: a context manager made of two plain methods, `open` and `close`.

The live progress line and the caught stopping signals (`run.py`, `progress.py`) are
both set up for the length of a run and undone however it ends; they say only what
setting up and undoing are.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Scope:
    """`with scope:` opens it, then closes it however the block ends (an exception goes on)."""

    def open(self) -> None:
        """Set up what the block needs."""

    def close(self) -> None:
        """Undo what `open` set up; called once per `open`."""

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
