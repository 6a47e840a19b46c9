"""`subagent-host run -i`: talking to the interactive child while its run is followed
(protocol.md §7.1 and §23).

The run is followed as `run` follows any (terminal/run_follow.py): its output shows as
it comes. Beside that, a `Talk` keeps what the events say of the conversation (turns
begun and ended, permissions waiting, the run's end) and acts on it:

- once the child waits for input (its turn ended, or a child given no prompt has
  started), a `> ` prompt takes the next message, sent with `run/send`; an empty line
  or the end of the input (Ctrl-D) closes the run (`run/close`);
- a permission asked is shown with the tool's kind, name and summary, and a line
  answers it (`run/permit`): `y` allow once, `a` always, `n` reject;
- Ctrl-C while a turn runs interrupts the turn (`run/interrupt`); a second one within
  `SECOND_CTRL_C_S`, or one while no turn runs, stops the run as Ctrl-C always does.

Input is read without blocking the loop (terminal/line_input.py). The prompts go to
stderr, in the live line's place, and only when stdin and stderr are a terminal (as a
shell's `read -p`); piped in, the lines are read all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Final

from subagent_host.client import (
    ChildEvent,
    Host,
    HostConnectionError,
    HostError,
    PendingPermission,
    PermissionEvent,
    PermissionStage,
    RequestRefused,
    RunStatus,
    StatusEvent,
    TurnEvent,
)
from subagent_host.rpc.wire import EventWire
from subagent_host.terminal import permission_prompt
from subagent_host.terminal.line_input import LineInput
from subagent_host.terminal.progress import RunProgress
from subagent_host.terminal.run_exits import PROG
from subagent_host.values import TERMINAL
from subagent_host.values.choices import Phase

PROMPT: Final = "> "
STDIN: Final = 0
SILENT_BACKENDS: Final = frozenset({"pi", "command"})
"""The backends that cannot ask before a tool runs: pi has no permission prompts, a
command no protocol to ask in (protocol.md §23.4). Every other one (claude, codex and
every configured ACP agent, whatever its name) can: its children are spawned with
`approvals: "client"`."""
SECOND_CTRL_C_S: Final = 2.0
"""A Ctrl-C this soon after one that interrupted a turn stops the run: a person who
presses it twice wants out, whether or not the turn has ended meanwhile."""


async def interactive_spawn(host: Host, spawn: dict[str, Any]) -> dict[str, Any]:
    """`spawn` made interactive, and asking this client before its tools run where its
    CLI can ask. A backend the command line does not name (an agent definition's, the
    server's choice) is read from the plan a `preflight` makes; a launch it refuses is
    left for the spawn to refuse in the same words."""
    backend = spawn.get("backend") or ("command" if spawn.get("command") else None)
    if backend is None:
        checked = await host.preflight(**{k: v for k, v in spawn.items() if k != "mode"})
        if checked.accepted and checked.plan is not None and checked.plan.children:
            backend = checked.plan.children[0].backend
    asks = backend is not None and backend not in SILENT_BACKENDS
    approvals = "client" if asks else None
    return {**spawn, "interactive": True, "approvals": approvals}


class Talk:
    """One interactive run's conversation, as a person at a terminal has it."""

    def __init__(
        self,
        host: Host,
        progress: RunProgress,
        *,
        prompted: bool,
        before_asking: Callable[[], None],
    ) -> None:
        self._host = host
        self._progress = progress
        self._lines = LineInput(STDIN)
        self._asks = os.isatty(STDIN) and progress.shown
        """Whether prompts are shown (stdin and stderr are a terminal)."""
        self.run_id = ""
        """The run talked to, once spawned."""
        self._before_asking = before_asking
        """Ends what is shown of the output's last line, so that a prompt starts its own."""
        self._begun = 0
        self._ended_turns = 0
        self._expected = 1 if prompted else 0
        """Turns that must have begun before the child can wait for input: its prompt's,
        and each message sent while it waited (counted, the events may come late)."""
        self._started = False
        self._pending: dict[str, PendingPermission] = {}
        self._left: set[str] = set()
        """Permissions no answer will come for from here (the input ended, and they offer
        no reject): left to their timeout."""
        self._over = False
        self._closing = False
        self._changed = asyncio.Event()
        self._interrupted_at: float | None = None
        self._requests: set[asyncio.Task[None]] = set()

    # --- what the events say ---------------------------------------------------------

    def take(self, event: EventWire) -> None:
        """An event of the run (a `run` event taker): what it changes of the conversation."""
        match event.event:
            case TurnEvent(phase=Phase.START):
                self._begun += 1
            case TurnEvent(phase=Phase.END):
                self._ended_turns += 1
            case ChildEvent(status=RunStatus.RUNNING):
                self._started = True
            case ChildEvent(status=status) | StatusEvent(status=status) if status in TERMINAL:
                self._over = True
            case PermissionEvent(stage=PermissionStage.ASKED) as asked:
                self._pending[asked.permission_id] = asked.pending()
            case PermissionEvent(permission_id=permission_id):
                self._pending.pop(permission_id, None)
            case _:
                return
        self._changed.set()

    @property
    def turn_running(self) -> bool:
        return self._begun < self._expected or self._begun > self._ended_turns

    @property
    def waits_for_input(self) -> bool:
        return self._started and not self._over and not self._closing and not self.turn_running

    # --- Ctrl-C ----------------------------------------------------------------------

    def take_ctrl_c(self) -> bool:
        """`Interrupts.taken`: a Ctrl-C while a turn runs interrupts it (True); one soon
        after that, or while none runs, is left to stop the run (False)."""
        now = asyncio.get_running_loop().time()
        if self._over or not self._started or not self.turn_running:
            return False
        if self._interrupted_at is not None and now - self._interrupted_at < SECOND_CTRL_C_S:
            return False
        self._interrupted_at = now
        self._say("interrupting the turn (Ctrl-C again to stop the run)")
        self._request(self._host.interrupt(self.run_id))
        return True

    def _request(self, call: Coroutine[Any, Any, object]) -> None:
        async def sent() -> None:
            # Refused: the turn, or the child, ended meanwhile; a server gone is the
            # follow's to tell.
            with contextlib.suppress(HostError, HostConnectionError):
                await call

        task = asyncio.create_task(sent())
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    # --- the conversation --------------------------------------------------------------

    async def converse(self) -> None:
        """Answer what waits, and take the next message whenever the child waits, until
        the run has ended. Raises `HostConnectionError` when the server goes away."""
        try:
            while not self._over:
                self._changed.clear()
                asked = [p for p in self._pending.values() if p.permission_id not in self._left]
                if asked:
                    await self._ask_permission(asked[0])
                elif self.waits_for_input:
                    await self._take_message()
                else:
                    await self._changed.wait()
        finally:
            self._progress.withdraw()
            for task in list(self._requests):
                task.cancel()  # an interrupt of a turn that is over anyway

    async def _take_message(self) -> None:
        self._before_asking()
        if self._asks:
            self._progress.ask(PROMPT)
        line = await self._read_unless_changed()
        if line is _CHANGED:
            return  # asked again, if the child still waits
        self._answered(line)
        if not isinstance(line, str) or not line.strip():
            self._closing = True
            try:
                await self._host.close_run(self.run_id)
            except HostError as exc:  # it ended meanwhile, or the server cannot close it
                self._say(f"{PROG}: {exc.message}")
            return
        # The child waited: the message begins the turn after those begun, and a Ctrl-C
        # from now on is that turn's, even before the reply or the turn's events come.
        expected, self._expected = self._expected, max(self._expected, self._begun + 1)
        try:
            await self._host.send(self.run_id, line)
        except HostError as exc:  # the child ended meanwhile, or a message it cannot take
            self._expected = expected
            if not isinstance(exc, RequestRefused):  # its end is on its way
                self._say(f"{PROG}: {exc.message}")

    async def _ask_permission(self, permission: PendingPermission) -> None:
        self._before_asking()
        self._say(permission_prompt.describe(permission))
        while permission.permission_id in self._pending and not self._over:
            self._changed.clear()
            if self._asks:
                self._progress.ask(permission_prompt.question(permission))
            line = await self._read_unless_changed()
            if line is _CHANGED:
                continue  # answered elsewhere, withdrawn, or the run ended: asked no more
            self._answered(line)
            if line is None:  # no one will type more: its reject, or left to its timeout
                option = permission_prompt.refusal(permission)
                if option is None:
                    self._left.add(permission.permission_id)
                    break
            else:
                option = permission_prompt.chosen(permission, str(line))
                if option is None:
                    continue  # not an answer it takes: asked again
            try:
                await self._host.permit(self.run_id, permission.permission_id, option.option_id)
            except RequestRefused:  # answered meanwhile (its timeout, another client)
                pass
            self._pending.pop(permission.permission_id, None)
        self._progress.withdraw()

    async def _read_unless_changed(self) -> str | None | object:
        """The next line (None at the end of the input), or `_CHANGED` if what the events
        say changed first (what was typed so far is kept for the next read)."""
        reading = asyncio.ensure_future(self._lines.line())
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait({reading, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in (reading, changed):
                waiting.cancel()
        return reading.result() if reading.done() and not reading.cancelled() else _CHANGED

    def _answered(self, line: str | None | object) -> None:
        if self._asks:
            if line is None:
                self._write("\n")  # Ctrl-D ends no line: the next output starts its own
            self._progress.answered()

    def _say(self, text: str) -> None:
        self._progress.above(lambda: self._write(text + "\n"))

    def _write(self, text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()


_CHANGED: Final = object()
"""What `_read_unless_changed` returns when the events changed before a line came."""
