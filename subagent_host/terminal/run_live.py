"""The run's output as it comes, for `subagent-host run` on a terminal (protocol.md §7.1):
a command's stdout line by line, an agent's text line by line and one line per tool
call (the normalized agent events of §11), each printed above the live line.

Whole lines only while the run goes on: the status line is redrawn below each one, and a
line cut in the middle would be torn by it. What is left of a last line is printed at the
end.
"""

from __future__ import annotations

import sys
from typing import Final

from subagent_host.rpc.wire import EventWire
from subagent_host.terminal.progress import RunProgress

# The mark before a tool call's line: set apart from the agent's own text.
TOOL_MARK: Final = "›"


class LiveOutput:
    """Prints the run's events to stdout as lines, above `progress`'s line."""

    def __init__(self, progress: RunProgress) -> None:
        self._progress = progress
        self._pending = ""
        """The last line's start, until its end comes."""
        self.printed = False
        """Whether any of the run's output was printed."""

    def take(self, event: EventWire) -> None:
        if event.type in ("output", "message") and event.text:
            self._pending += event.text
            *lines, self._pending = self._pending.split("\n")
            if lines:
                self._print("".join(line + "\n" for line in lines))
        if event.type == "message" and event.final:
            self.flush()  # a response's text has ended: its last line with it
        elif event.type == "tool" and event.phase == "start":
            self.flush()
            what = event.summary or event.name or ""
            self._print(f"{TOOL_MARK} {event.kind or 'other'}: {what}\n")

    def flush(self) -> None:
        """What is left of a last line, ended (the prompt after it starts on its own)."""
        if self._pending:
            pending, self._pending = self._pending, ""
            self._print(pending + "\n")

    def _print(self, text: str) -> None:
        def write() -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        self._progress.above(write)
        self.printed = True
