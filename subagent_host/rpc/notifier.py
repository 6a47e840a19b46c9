"""Server-to-client notifications (`run/event`, `$/progress`): encoded and emitted directly.

Notifications are not answers: they need none of dispatch's request
bookkeeping, so they leave through this small object instead. A run's events
are published while a handler is still running (a `spawn` launches its run and
the run state machine emits `queued`); going through here keeps that path from climbing
back into the dispatcher that called the handler.

A notification may be *about* something (a run id). While that subject is held
(`hold`), its notifications wait here, in order, and leave when it is released:
a `background` spawn holds its run until its reply has been written, so the
client never sees an event of a run it has not been told of. Other subjects are
never held back by it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from cattrs import Converter

from subagent_host.rpc.json_codec import JsonEncodeError, encode_json

logger = logging.getLogger(__name__)

JSONRPC: Final = "2.0"


class Notifier:
    """Sends notifications to the client once `attach` gave it the connection's output."""

    def __init__(self, converter: Converter) -> None:
        self._converter = converter
        self._emit: Callable[[bytes], None] = _drop
        # Held subjects, each with its notifications not sent yet (encoded, in order).
        self._held: dict[str, list[bytes]] = {}

    def attach(self, emit: Callable[[bytes], None]) -> None:
        """Install the function that writes one JSON text to the client."""
        self._emit = emit

    def __call__(self, method: str, params: Any | None = None, about: str | None = None) -> None:
        """Send one notification; params are unstructured (attrs types become camelCase).

        `about` names its subject: while that is held, the notification waits.
        """
        message = {"jsonrpc": JSONRPC, "method": method}
        if params is not None:
            message["params"] = self._converter.unstructure(params)
        try:
            body = encode_json(message)
        except JsonEncodeError:
            logger.exception("dropped notification %s that is not valid JSON", method)
            return
        waiting = self._held.get(about) if about is not None else None
        if waiting is not None:
            waiting.append(body)
        else:
            self._emit(body)

    def hold(self, about: str) -> None:
        """Keep the notifications about `about` back until `release` (holding twice is once)."""
        self._held.setdefault(about, [])

    def release(self, about: str) -> None:
        """Send what waited about `about`, in order, and hold it no longer."""
        for body in self._held.pop(about, ()):
            self._emit(body)

    @property
    def held(self) -> int:
        """How many subjects are held now (each is released once its reply is written)."""
        return len(self._held)


def _drop(_body: bytes) -> None:
    logger.error("no output attached; dropping a notification")
