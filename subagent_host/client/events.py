"""`run/event` notifications, kept for the runs a caller follows, in bounded memory.

Events can arrive before anyone asks for them: a `task`-mode spawn's stream
before its reply, and any run's while its caller is busy elsewhere. The router
keeps the newest events of the few most recent runs (`RecentEvents`), so that
following a run just spawned usually needs no round trip, and hands each
event to the listeners of its run. Everything here is bounded: a run nobody
follows costs at most one `RecentEvents`, and a listener that reads slowly
loses its oldest events, never memory. A loss shows as a gap in `seq`, which
`Host.events` fills from `status {since}` (protocol.md §9).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterable, Iterator
from typing import Final

from subagent_host.client.errors import HostConnectionError
from subagent_host.rpc.wire import EventWire
from subagent_host.values.events import text_of

# What an event weighs: its text in UTF-8 (approximated by its length) plus its fields,
# as the server weighs the events it keeps (runs/state.py).
EVENT_OVERHEAD_BYTES: Final = 128
# Runs whose newest events are kept for a caller who has not asked yet: a host
# follows the runs it just started, so a few suffice; older ones are read back.
RECENT_RUNS: Final = 16
RECENT_EVENTS: Final = 256
RECENT_BYTES: Final = 1024 * 1024
# A listener's backlog while its caller is busy: a streaming run's output can outpace
# it, and then its oldest events are dropped (and read back) rather than kept.
LISTENER_EVENTS: Final = 4096
LISTENER_BYTES: Final = 8 * 1024 * 1024


def weight(event: EventWire) -> int:
    """Its text, or a terminal `status` event's output, plus the rest."""
    return len(text_of(event.event) or "") + EVENT_OVERHEAD_BYTES


class BoundedEvents:
    """Events in arrival order; beyond `max_events` or `max_bytes` the oldest are dropped."""

    def __init__(self, max_events: int, max_bytes: int, events: Iterable[EventWire] = ()) -> None:
        self._max_events = max_events
        self._max_bytes = max_bytes
        self._events: collections.deque[EventWire] = collections.deque()
        self._bytes = 0
        for event in events:
            self.append(event)

    def append(self, event: EventWire) -> None:
        self._events.append(event)
        self._bytes += weight(event)
        while len(self._events) > self._max_events or (
            self._bytes > self._max_bytes and len(self._events) > 1
        ):
            self._bytes -= weight(self._events.popleft())

    def take(self) -> list[EventWire]:
        """Every event held, in order; the buffer is left empty."""
        events = list(self._events)
        self._events.clear()
        self._bytes = 0
        return events

    def __iter__(self) -> Iterator[EventWire]:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)


class RunListener:
    """One caller following one run: its events as they arrive, bounded (see the module)."""

    def __init__(self, run_id: str, backlog: Iterable[EventWire]) -> None:
        self.run_id = run_id
        self._events = BoundedEvents(LISTENER_EVENTS, LISTENER_BYTES, backlog)
        self._arrived = asyncio.Event()
        self._closed: HostConnectionError | None = None
        if len(self._events):
            self._arrived.set()

    def put(self, event: EventWire) -> None:
        self._events.append(event)
        self._arrived.set()

    def close(self, reason: HostConnectionError) -> None:
        self._closed = reason
        self._arrived.set()

    def take_now(self) -> list[EventWire]:
        """The events that arrived since the last take, without waiting."""
        return self._events.take()

    async def take(self) -> list[EventWire]:
        """The events that arrived since the last take, waiting for one if there is none.

        Raises `HostConnectionError` once the connection has ended and all are taken.
        """
        while not len(self._events):
            if self._closed is not None:
                raise self._closed
            self._arrived.clear()
            await self._arrived.wait()
        return self._events.take()


class EventRouter:
    """Receives every `run/event` of a connection; see the module for what it keeps."""

    def __init__(self) -> None:
        self._recent: collections.OrderedDict[str, BoundedEvents] = collections.OrderedDict()
        self._listeners: dict[str, set[RunListener]] = {}
        self._closed: HostConnectionError | None = None

    def publish(self, event: EventWire) -> None:
        recent = self._recent.pop(event.run_id, None)
        if recent is None:
            recent = BoundedEvents(RECENT_EVENTS, RECENT_BYTES)
        recent.append(event)
        self._recent[event.run_id] = recent  # the most recent run last
        if len(self._recent) > RECENT_RUNS:
            self._recent.popitem(last=False)
        for listener in self._listeners.get(event.run_id, ()):
            listener.put(event)

    def listen(self, run_id: str) -> RunListener:
        """Follow `run_id` from now on, starting with the events kept of it so far."""
        listener = RunListener(run_id, self._recent.get(run_id, ()))
        if self._closed is not None:
            listener.close(self._closed)
        self._listeners.setdefault(run_id, set()).add(listener)
        return listener

    def forget(self, listener: RunListener) -> None:
        listeners = self._listeners.get(listener.run_id, set())
        listeners.discard(listener)
        if not listeners:
            self._listeners.pop(listener.run_id, None)

    def close(self, reason: HostConnectionError) -> None:
        """No more events will come: every listener raises once it has taken the rest."""
        self._closed = reason
        for listeners in self._listeners.values():
            for listener in listeners:
                listener.close(reason)

    @property
    def recent_runs(self) -> int:
        """How many runs have events kept for them (for tests of the bounds)."""
        return len(self._recent)
