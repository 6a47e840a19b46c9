"""The read loop of one connection: stdin bytes -> frames -> dispatch, replies -> stdout.

`app.serve` owns the lifecycle around it (signals, draining, shutdown); this
module only moves bytes, in the framing the decoder detected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Final

from subagent_host.rpc.dispatch import HostProtocol
from subagent_host.rpc.framing import AutoDecoder, encode_frame
from subagent_host.rpc.stdio import InputStream, OutputStream
from subagent_host.values import Framing

logger = logging.getLogger(__name__)

# Replies queued within one turn of the loop leave together, but never more than
# this at once, so a client reading a burst of answers can start on the first ones.
FLUSH_BYTES: Final = 16 * 1024
# The longest a hold (`holding`) keeps output back: a commit takes well under a
# millisecond; a disk that stalls must not stall every run's events with it.
HOLD_MAX_S: Final = 0.01


class Connection:
    """Joins a decoder, the dispatcher and the output stream."""

    def __init__(self, protocol: HostProtocol, decoder: AutoDecoder, output: OutputStream) -> None:
        self._protocol = protocol
        self._decoder = decoder
        self._output = output
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._holds: set[object] = set()

    @property
    def framing(self) -> Framing:
        """The framing replies use: the detected one (NDJSON before anything was read)."""
        return self._decoder.framing or Framing.NDJSON

    async def writable(self) -> None:
        """Return once the output may take more: at once, or once the client has read
        what waits down below the queue's low-water mark (rpc/stdio.py)."""
        await self._output.drain()

    def emit(self, body: bytes) -> None:
        """Queue one JSON text for the client, in the connection's framing.

        Everything emitted during one turn of the event loop, and the next, leaves
        in one write: a client that pipelines hundreds of requests gets its
        answers in a few system calls instead of one each, and the events that
        settle a run leave together with the reply whose handler they wake (which
        runs one turn later). Each write wakes the client: fewer is faster.
        """
        if not self._pending:
            self._schedule_flush()
        self._pending.append(encode_frame(body, self.framing))
        self._pending_bytes += len(body)
        if self._pending_bytes >= FLUSH_BYTES:
            self.flush()

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Keep what is emitted meanwhile queued until the block is left (HOLD_MAX_S at most).

        A handler waits inside it for the disk before it answers: the events
        emitted meanwhile (those that settle its run) then leave in one write
        with its answer, which is emitted in the step that leaves the block, as
        `emit` promises, instead of one write before it. Same bytes, same order.
        """
        hold = object()
        self._holds.add(hold)
        cap = asyncio.get_running_loop().call_later(HOLD_MAX_S, self._expire, hold)
        try:
            yield
        finally:
            cap.cancel()
            self._release(hold)

    def _expire(self, hold: object) -> None:
        """A hold's cap is over: what waited behind it leaves now, whatever later holds
        say (a steady stream of them must not keep output back for ever)."""
        self._holds.discard(hold)
        if self._pending:
            self._schedule_flush(honour_holds=False)

    def _release(self, hold: object) -> None:
        if hold in self._holds:
            self._holds.discard(hold)
            if self._pending and not self._holds:
                self._schedule_flush()

    def _schedule_flush(self, honour_holds: bool = True) -> None:
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self._flush_unless_held if honour_holds else self.flush)

    def _flush_unless_held(self) -> None:
        if not self._holds:  # else the last hold's end schedules the flush
            self.flush()

    def flush(self) -> None:
        """Hand every queued reply to the output stream now."""
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._pending_bytes = 0
            self._output.write(data)

    async def read_until_eof(self, source: InputStream) -> None:
        """Dispatch every message until end of input, or until LSP's `exit` (protocol.md §6):
        nothing after it is read, not even the rest of the chunk it came in."""
        lifecycle = self._protocol.lifecycle
        while chunk := await source.read():
            for frame in self._decoder.feed(chunk):
                self._protocol.receive(frame)
                if lifecycle.has_exited:
                    return
            # Flow control: read no further while the client is not reading our replies.
            await self._output.drain()
        for frame in self._decoder.finish():
            self._protocol.receive(frame)
            if lifecycle.has_exited:
                return
