"""Server-to-client notifications (`run/event`, `$/progress`): encoded and emitted directly.

Notifications are not answers: they need none of dispatch's request
bookkeeping, so they leave through this small object instead. A run's events
are published while a handler is still running (a `spawn` launches its run and
the run book emits `queued`); going through here keeps that path from climbing
back into the dispatcher that called the handler.
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

    def attach(self, emit: Callable[[bytes], None]) -> None:
        """Install the function that writes one JSON text to the client."""
        self._emit = emit

    def __call__(self, method: str, params: Any | None = None) -> None:
        """Send one notification; params are unstructured (attrs types become camelCase)."""
        message = {"jsonrpc": JSONRPC, "method": method}
        if params is not None:
            message["params"] = self._converter.unstructure(params)
        try:
            self._emit(encode_json(message))
        except JsonEncodeError:
            logger.exception("dropped notification %s that is not valid JSON", method)


def _drop(_body: bytes) -> None:
    logger.error("no output attached; dropping a notification")
