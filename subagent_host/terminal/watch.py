"""`subagent-host watch [--session ID]`: a full-screen live view of a state directory's
runs and their children, however many servers write it (protocol.md §7).

It reads; it is no server. Every `POLL_S` it asks the database whether anyone committed
(`PRAGMA data_version`: a reader in another process cannot be woken) and reads the runs
again only then; once a second it redraws, so elapsed times tick, with the running
children's CPU and memory sampled afresh. Reads and samples run on one thread of their
own, never on the loop that takes the keys.

Keys: ↑/↓ (or k/j) select a run, Enter shows its output and Esc or Enter goes back, `s`
asks in the footer whether to stop it and `y` stops it (through
`subagent_host.terminal.stopping`, the path `subagent-host stop` takes; any other key
keeps it running: the stop of a tree of agents cannot be undone), `a` allows once and `r`
rejects the oldest permission the selected run's interactive children wait on (shown
under the run; answered through `subagent_host.terminal.live`, the path `subagent-host
permit` takes, as `client:terminal`), `q` quits with status 0. Ctrl-C quits with 130,
SIGTERM with 143 and SIGHUP with 129; on every way out the terminal is given back as it
was. Without a terminal on standard input and output it says so in one line and exits
with 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs
from rich.console import Console
from rich.live import Live

from subagent_host import SERVER_NAME
from subagent_host.runs.state import TERMINAL
from subagent_host.store.browse import BrowseError, StateBrowser
from subagent_host.terminal.keys import Key, cbreak, decode
from subagent_host.terminal.options import state_dir_of, subcommand_parser
from subagent_host.terminal.views import plural, short_id
from subagent_host.terminal.watch_board import (
    BoardCache,
    OutputTail,
    RunLine,
    read_board,
    read_tail,
    sample_running,
)
from subagent_host.terminal.watch_screen import View, screen

POLL_S: Final = 0.2
"""How often the database is asked whether it changed: a cheap pragma, and a fifth of a
second is as soon as a person notices."""
TICK_S: Final = 1.0
"""Redraws without a change, so elapsed times and running children's CPU move."""
NOT_A_TERMINAL: Final = 2
QUIT_BY_SIGNAL: Final = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}

T = TypeVar("T")


def main(argv: Sequence[str]) -> int:
    parser = subcommand_parser(
        "watch", "A live view of the runs of a state directory and their children."
    )
    parser.add_argument("--session", metavar="ID", help="only this session's runs")
    parser.epilog = (
        "keys: up/down select a run, enter shows its output (esc or enter: back),"
        " s stops it once y answers its question, a allows once and r rejects the permission"
        " its children wait on, q quits"
    )
    args = parser.parse_args(argv)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(
            f"{SERVER_NAME} watch: needs a terminal on standard input and output"
            f" ('{SERVER_NAME} runs' lists runs without one)",
            file=sys.stderr,
        )
        return NOT_A_TERMINAL
    return asyncio.run(Watch(state_dir_of(args), args.session).run())


class Watch:
    """One live view: what it read, what the person chose, and the loop's tasks."""

    def __init__(self, state_dir: Path, session_id: str | None) -> None:
        self._state_dir = state_dir
        self._board: tuple[RunLine, ...] = ()
        self._view = View(state_dir=state_dir, session_id=session_id)
        self._cache = BoardCache()
        self._browser: StateBrowser | None = None
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="watch-read")
        self._changed = asyncio.Event()
        """Set when what is shown must be read again now (a key opened the output view)."""
        self._done: asyncio.Future[int] | None = None
        self._live: Live | None = None
        self._acting: set[asyncio.Task[None]] = set()
        """A stop or an answer under way (cancelled when watch ends)."""
        self._asking: str | None = None
        """The run whose stop `s` asked about: the next key answers (`y` stops it)."""
        self._chose = False
        """Whether the person chose a run (a key that acts on one): until then the newest
        run is the selected one."""

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        for signum, code in QUIT_BY_SIGNAL.items():
            loop.add_signal_handler(signum, self._quit, code)
        loop.add_signal_handler(signal.SIGWINCH, self._draw)
        fd = sys.stdin.fileno()
        try:
            with cbreak(fd), Live(console=Console(), screen=True, auto_refresh=False) as live:
                self._live = live
                loop.add_reader(fd, self._read_keys, fd)
                tasks = [asyncio.create_task(self._follow()), asyncio.create_task(self._tick())]
                for task in tasks:
                    task.add_done_callback(self._failed)
                try:
                    return await self._done
                finally:
                    loop.remove_reader(fd)
                    for task in [*tasks, *self._acting]:
                        task.cancel()
                    await asyncio.gather(*tasks, *self._acting, return_exceptions=True)
                    self._live = None
        finally:
            for signum in (*QUIT_BY_SIGNAL, signal.SIGWINCH):
                loop.remove_signal_handler(signum)
            await self._off_loop(self._close)
            self._reader.shutdown(wait=True)

    # --- reading -------------------------------------------------------------------------

    async def _off_loop(self, call: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._reader, call, *args)

    async def _follow(self) -> None:
        """Read the runs again each time the database changed (or a key asks for it)."""
        version: int | None = None
        while True:
            try:
                if self._browser is None:
                    self._browser = await self._off_loop(StateBrowser.open, self._state_dir)
                    version = None
                now = await self._off_loop(self._browser.data_version)
                if now != version or self._changed.is_set():
                    self._changed.clear()
                    version = now
                    await self._read()
                    self._view = attrs.evolve(self._view, problem=None)
                    self._draw()
            except BrowseError as exc:
                self._view = attrs.evolve(self._view, problem=str(exc))
                self._draw()
                await self._off_loop(self._close)  # opened afresh: the file may be new
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), POLL_S)

    async def _read(self) -> None:
        browser = self._browser
        assert browser is not None
        board = await self._off_loop(read_board, browser, self._view.session_id, self._cache)
        self._board = await self._off_loop(sample_running, board)
        ids = [line.run.run_id for line in self._board]
        if self._view.selected not in ids:  # pruned (or none yet): the newest instead
            self._view = attrs.evolve(self._view, selected=ids[0] if ids else None, tail=None)
        elif not self._chose:
            self._view = attrs.evolve(self._view, selected=ids[0])
        if self._view.tail is not None and self._view.selected is not None:
            tail = await self._off_loop(read_tail, browser, self._view.selected)
            self._view = attrs.evolve(self._view, tail=tail)

    async def _tick(self) -> None:
        """Once a second: the running children's CPU and memory, and every elapsed time."""
        while True:
            await asyncio.sleep(TICK_S)  # the tick is the point of this wait
            board = self._board
            if any(line.run.status not in TERMINAL for line in board):
                sampled = await self._off_loop(sample_running, board)
                if self._board is board:  # else a newer read came meanwhile, sampled too
                    self._board = sampled
            self._draw()

    def _close(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._browser = None

    # --- drawing ---------------------------------------------------------------------------

    def _draw(self) -> None:
        if self._live is None:
            return
        height = self._live.console.size.height
        self._live.update(screen(self._board, self._view, datetime.now(UTC), height), refresh=True)

    # --- keys ------------------------------------------------------------------------------

    def _read_keys(self, fd: int) -> None:
        try:
            data = os.read(fd, 1024)
        except BlockingIOError:
            return
        if not data:  # the terminal is gone
            self._quit(QUIT_BY_SIGNAL[signal.SIGHUP])
            return
        for key in decode(data):
            self._press(key)
        self._draw()

    def _press(self, key: Key) -> None:
        self._chose = self._chose or key is not Key.QUIT
        if self._asking is not None:
            self._answer(self._asking, key)
        elif key is Key.QUIT:
            self._quit(0)
        elif key in (Key.UP, Key.DOWN):
            self._move(-1 if key is Key.UP else 1)
        elif key is Key.ENTER and self._view.tail is None:
            self._open_output()
        elif key in (Key.ENTER, Key.ESCAPE):
            self._view = attrs.evolve(self._view, tail=None)
        elif key is Key.STOP:
            self._ask_to_stop()
        elif key in (Key.ALLOW, Key.REJECT):
            self._answer_permission(allow=key is Key.ALLOW)

    def _move(self, step: int) -> None:
        ids = [line.run.run_id for line in self._board]
        if not ids:
            return
        at = ids.index(self._view.selected) if self._view.selected in ids else 0
        selected = ids[max(0, min(len(ids) - 1, at + step))]
        if selected != self._view.selected:
            self._view = attrs.evolve(self._view, selected=selected)
            if self._view.tail is not None:
                self._open_output()

    def _open_output(self) -> None:
        """Show the selected run's output: what is known at once, the rest as it is read."""
        line = next((ln for ln in self._board if ln.run.run_id == self._view.selected), None)
        if line is None:
            return
        self._view = attrs.evolve(self._view, tail=OutputTail(line.run, ()))
        self._changed.set()

    def _ask_to_stop(self) -> None:
        """The question `s` asks first: a stopped tree of agents cannot be started again."""
        line = next((ln for ln in self._board if ln.run.run_id == self._view.selected), None)
        if line is None:
            return
        name = f"run {short_id(line.run.run_id)}"
        if line.run.status in TERMINAL:
            self._say(f"{name} has ended already ({line.run.status})")
            return
        self._asking = line.run.run_id
        self._say(f"stop {name} and its {plural(len(line.run.children), 'child', 'children')}? y/n")

    def _answer(self, run_id: str, key: Key) -> None:
        """`y` stops the run asked about; any other key leaves it running."""
        self._asking = None
        name = f"run {short_id(run_id)}"
        if key is not Key.YES:
            self._say(f"{name} not stopped")
            return
        self._say(f"stopping {name}…")
        self._act(self._stop(run_id, name))

    def _act(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._acting.add(task)
        task.add_done_callback(self._acting.discard)

    async def _stop(self, run_id: str, name: str) -> None:
        """Stop the run as `subagent-host stop` does; the outcome in the footer."""
        try:
            # Imported when first used: the cross-process stop is a module of its own.
            stopping: Any = importlib.import_module("subagent_host.terminal.stopping")
        except ImportError:
            self._say(f"cannot stop {name}: this installation has no cross-process stop")
            return
        try:
            snapshot = stopping.stop_run(self._state_dir, run_id, grace_ms=None)
            if inspect.isawaitable(snapshot):
                snapshot = await snapshot
        except stopping.StopFailed as exc:
            self._say(f"cannot stop {name}: {exc}")
            return
        except Exception as exc:  # a bug of the stop path: said here, not lost with the task
            self._say(f"cannot stop {name}: internal error ({type(exc).__name__}: {exc})")
            return
        self._say(f"{name} {getattr(snapshot, 'status', 'stopped')}")
        self._changed.set()

    def _answer_permission(self, *, allow: bool) -> None:
        """`a`/`r`: answer the selected run's oldest pending permission (the one marked)."""
        line = next((ln for ln in self._board if ln.run.run_id == self._view.selected), None)
        if line is None:
            return
        if not line.pending:
            self._say(f"run {short_id(line.run.run_id)} waits on no permission")
            return
        permission = line.pending[0].permission_id
        self._say(f"{'allowing' if allow else 'rejecting'} {permission}…")
        self._act(self._permit(line.run.run_id, permission, allow))

    async def _permit(self, run_id: str, permission: str, allow: bool) -> None:
        """Answer as `subagent-host permit` does (this once); the outcome in the footer."""
        # Imported when first used: the control socket's client is not needed to watch.
        from subagent_host.terminal import live
        from subagent_host.terminal.owners import OwnerFailed

        try:
            _pending, result = await live.permit(
                self._state_dir, run_id, permission, allow, always=False
            )
        except OwnerFailed as exc:
            self._say(f"cannot answer {permission}: {exc}")
            return
        except Exception as exc:  # a bug of the answer's path: said here, not lost with the task
            self._say(f"cannot answer {permission}: internal error ({type(exc).__name__}: {exc})")
            return
        self._say(f"{permission} answered {result.kind}")
        self._changed.set()

    def _say(self, message: str) -> None:
        self._view = attrs.evolve(self._view, message=message)
        self._draw()

    def _failed(self, task: asyncio.Task[None]) -> None:
        """A bug in reading or drawing ends the view (its traceback follows, once the
        terminal is given back) rather than leave a screen that no longer changes."""
        if task.cancelled() or self._done is None or self._done.done():
            return
        error = task.exception()
        if error is not None:
            self._done.set_exception(error)

    def _quit(self, code: int) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(code)
