"""A conversation with a plain command: one line in, the next line out.

A `command` child has no protocol of its own, so the host keeps the simplest one a
line-oriented program already speaks (a REPL, `bc`, a script reading `stdin`):

- A message is written to its stdin as it is, with one newline added (a message of
  several lines arrives as several lines). The first prompt, if any, is the first.
- A turn starts when a message is written and ends at the next line the child prints
  on stdout (`end_turn`): its answer has begun, and it is ready for the next. A child
  that prints nothing keeps its turn running; what it prints while waiting is output,
  not a turn. Its stderr never ends a turn.
- `queue` waits for the turn's end; `steer` is written at once (a program reads its
  stdin when it likes: it is `delivered`, and the turn goes on).
- Interrupt: SIGINT to its process group, as a terminal's Ctrl-C; the turn ends
  `interrupted` then, whatever the program does with the signal (its default is to
  exit: a child meant to live on traps it).

It never asks permission: it takes only approvals `cli`. Its output stays the
command's own (`output` events, its stdout as its final text): this conversation
only tells where turns start and end.
"""

from __future__ import annotations

import signal
from collections import deque
from collections.abc import Sequence
from typing import Final

from subagent_host.backends.base import ItemSpec
from subagent_host.backends.interactive.base import (
    Approvals,
    Delivery,
    DeliveryState,
    MessageDelivered,
    Reaction,
    Signal,
    TurnEnded,
    TurnStarted,
    Write,
    approvals_supported,
)

APPROVALS: Final = frozenset({Approvals.CLI})
"""A plain command never asks before it acts."""


class CommandConversation:
    """One interactive command child (a `Conversation`, backends/interactive/base.py)."""

    def __init__(self) -> None:
        self._turn_running = False
        self._queued: deque[tuple[str, str]] = deque()

    @classmethod
    def for_item(cls, item: ItemSpec, approvals: Approvals) -> CommandConversation:
        """ValueError (`approvals-unsupported`): approvals other than `cli`."""
        approvals_supported("command", approvals, APPROVALS)
        return cls()

    @property
    def turn_running(self) -> bool:
        return self._turn_running

    @property
    def session_id(self) -> None:
        return None  # nothing to continue: a resume starts the command again

    def opening(self, prompt: str) -> Sequence[Reaction]:
        return self._start_turn(prompt) if prompt else []

    def on_line(self, line: bytes) -> Sequence[Reaction]:
        if not self._turn_running:
            return []
        return self._turn_ended("end_turn")

    def send(
        self, message_id: str, text: str, delivery: Delivery
    ) -> tuple[Sequence[Reaction], DeliveryState]:
        if not self._turn_running:
            return self._start_turn(text), DeliveryState.DELIVERED
        if delivery is Delivery.STEER:
            return [_line(text)], DeliveryState.DELIVERED
        self._queued.append((message_id, text))
        return [], DeliveryState.QUEUED

    def interrupt(self) -> Sequence[Reaction]:
        if not self._turn_running:
            return []
        return [Signal(signal.SIGINT), *self._turn_ended("interrupted")]

    def answer(self, permission_id: str, option_id: str) -> Sequence[Reaction]:
        raise KeyError(permission_id)  # a command never asks

    def queued(self) -> Sequence[str]:
        return [message_id for message_id, _ in self._queued]

    def _start_turn(self, text: str) -> list[Reaction]:
        self._turn_running = True
        return [_line(text), TurnStarted()]

    def _turn_ended(self, stop_reason: str) -> list[Reaction]:
        self._turn_running = False
        reactions: list[Reaction] = [TurnEnded(stop_reason)]
        if self._queued:
            message_id, text = self._queued.popleft()
            write, started = self._start_turn(text)
            reactions += [write, MessageDelivered(message_id), started]
        return reactions


def _line(text: str) -> Write:
    # `surrogatepass`: a lone surrogate never reaches here (the wire refuses it), but a
    # write must not be the place that fails.
    return Write(text.encode("utf-8", "surrogatepass") + b"\n")
