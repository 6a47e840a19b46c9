"""What a handler asks to run right after its request's answer (`after_answer`).

A `background` spawn's run must not be named in a notification before the reply
that names it: its notifications wait until that reply has been emitted, and
are released from here, in the same step (handlers/progress.py). Its own small
module, so that a handler reaches it without climbing back into the dispatcher
that called it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Final


class AfterAnswer:
    """What runs right after one request's answer is emitted (`after_answer`)."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], None]] = []
        self.answered = False

    def enter(self) -> None:
        """Make this the running request's (call inside its task: the task's context only)."""
        _ANSWERING.set(self)

    def run(self) -> None:
        self.answered = True
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback()


# The request whose handler is running (set inside its task; tasks the handler
# starts inherit it, which is harmless: once answered, a callback runs at once).
_ANSWERING: Final[contextvars.ContextVar[AfterAnswer | None]] = contextvars.ContextVar(
    "subagent_host_answering", default=None
)


def after_answer(callback: Callable[[], None]) -> None:
    """Call `callback` right after the running request's answer has been emitted.

    In the same step as the answer, whatever it is (a result, an error, -32800),
    so what `callback` emits follows the answer in the same write. In a batch the
    answer is then in its place in the batch's array, which leaves when the
    batch's last answer does. Outside a request, or once it is answered: now.
    """
    pending = _ANSWERING.get()
    if pending is None or pending.answered:
        callback()
    else:
        pending.callbacks.append(callback)
