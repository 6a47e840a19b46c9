"""How `subagent-host run` ends: its exit statuses, and the signals that stop its run first.

`run` (terminal/run.py) parses and starts; `run_follow` follows the run to its end;
both say how the process ends in these terms.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Final

from subagent_host import SERVER_NAME
from subagent_host.terminal.scope import Scope

PROG: Final = f"{SERVER_NAME} run"

EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
# The server ended before the run did: its run is `interrupted` (sysexits' EX_TEMPFAIL:
# trying again may work).
EXIT_INTERRUPTED: Final = 75
EXIT_TIMED_OUT: Final = 124  # as timeout(1)
# Next to 124: a limit the run was given ended it (an agent's turns or budget). Clear of
# 126/127 (a shell's "cannot run") and of 128+n (signals).
EXIT_LIMIT_REACHED: Final = 125
SIGNAL_BASE: Final = 128  # a shell's 128+n for "ended by signal n"

# The signals that stop the run before this process exits: Ctrl-C, kill, a closed terminal.
STOPPING_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupts(Scope):
    """The stopping signals, caught while a run goes on: the first one is kept (later ones
    change nothing: the stop it started ends within the server's grace)."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self.taken: Callable[[], bool] | None = None
        """Asked first on SIGINT: True when it was taken for something less than a stop
        (`run -i`: a Ctrl-C interrupts the turn), and the run goes on."""
        self._event = asyncio.Event()

    def open(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in STOPPING_SIGNALS:
            loop.add_signal_handler(signum, self._receive, signum)

    def close(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in STOPPING_SIGNALS:
            loop.remove_signal_handler(signum)

    def _receive(self, signum: signal.Signals) -> None:
        if signum == signal.SIGINT and self.received is None and self.taken and self.taken():
            return
        if self.received is None:
            self.received = signum
            self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
