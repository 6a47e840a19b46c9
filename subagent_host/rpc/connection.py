"""The read loop of one connection: stdin bytes -> frames -> dispatch, replies -> stdout.

`app.serve` owns the lifecycle around it (signals, draining, shutdown); this
module only moves bytes, in the framing the decoder detected.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from subagent_host.rpc.dispatch import HostProtocol
from subagent_host.rpc.framing import AutoDecoder, encode_frame
from subagent_host.rpc.stdio import InputStream, OutputStream
from subagent_host.values import Framing

logger = logging.getLogger(__name__)

# Replies queued within one turn of the loop leave together, but never more than
# this at once, so a client reading a burst of answers can start on the first ones.
FLUSH_BYTES: Final = 16 * 1024


class Connection:
    """Joins a decoder, the dispatcher and the output stream."""

    def __init__(self, protocol: HostProtocol, decoder: AutoDecoder, output: OutputStream) -> None:
        self._protocol = protocol
        self._decoder = decoder
        self._output = output
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    @property
    def framing(self) -> Framing:
        """The framing replies use: the detected one (NDJSON before anything was read)."""
        return self._decoder.framing or Framing.NDJSON

    def emit(self, body: bytes) -> None:
        """Queue one JSON text for the client, in the connection's framing.

        Everything emitted during one turn of the event loop, and the next, leaves
        in one write: a client that pipelines hundreds of requests gets its
        answers in a few system calls instead of one each, and the events that
        settle a run leave together with the reply whose handler they wake (which
        runs one turn later). Each write wakes the client: fewer is faster.
        """
        if not self._pending:
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_soon, self.flush)
        self._pending.append(encode_frame(body, self.framing))
        self._pending_bytes += len(body)
        if self._pending_bytes >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Hand every queued reply to the output stream now."""
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._pending_bytes = 0
            self._output.write(data)

    async def read_until_eof(self, source: InputStream) -> None:
        """Dispatch every message until end of input."""
        while chunk := await source.read():
            for frame in self._decoder.feed(chunk):
                self._protocol.receive(frame)
            # Flow control: read no further while the client is not reading our replies.
            await self._output.drain()
        for frame in self._decoder.finish():
            self._protocol.receive(frame)
