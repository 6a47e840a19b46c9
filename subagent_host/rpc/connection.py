"""The read loop of one connection: stdin bytes -> frames -> dispatch, replies -> stdout.

`app.serve` owns the lifecycle around it (signals, draining, shutdown); this
module only moves bytes, in the framing the decoder detected.
"""

from __future__ import annotations

import logging

from subagent_host.rpc.dispatch import HostProtocol
from subagent_host.rpc.framing import AutoDecoder, Framing, encode_frame
from subagent_host.rpc.stdio import InputStream, OutputStream

logger = logging.getLogger(__name__)


class Connection:
    """Joins a decoder, the dispatcher and the output stream."""

    def __init__(self, protocol: HostProtocol, decoder: AutoDecoder, output: OutputStream) -> None:
        self._protocol = protocol
        self._decoder = decoder
        self._output = output

    @property
    def framing(self) -> Framing:
        """The framing replies use: the detected one (NDJSON before anything was read)."""
        return self._decoder.framing or Framing.NDJSON

    def emit(self, body: bytes) -> None:
        """Write one JSON text to the client in the connection's framing."""
        self._output.write(encode_frame(body, self.framing))

    async def read_until_eof(self, source: InputStream) -> None:
        """Dispatch every message until end of input (or until the client stops reading)."""
        while not self._output.is_broken:
            chunk = await source.read()
            if not chunk:
                break
            for frame in self._decoder.feed(chunk):
                self._protocol.receive(frame)
            # Flow control: read no further while the client is not reading our replies.
            await self._output.drain()
        else:
            logger.warning("the client closed stdout; stopping as if stdin had ended")
            return
        for frame in self._decoder.finish():
            self._protocol.receive(frame)
