"""An agent's plan on its way to the wire (protocol.md §11): the sink redacts each entry
and ends the text said before it, the run's event is a `plan` event with every entry,
and the wire writes it as `{type: "plan", index, entries: [{content, priority,
status}]}` and reads it back; the retained events count its entries' text."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from subagent_host.backends.events import (
    PLAN_ENTRY_CHARS,
    MessageText,
    NormalizedEvents,
    PlanUpdated,
)
from subagent_host.backends.pi import PiParser
from subagent_host.backends.redaction import Redaction
from subagent_host.rpc.wire import EventWire
from subagent_host.rpc.wire.converter import make_converter
from subagent_host.runs.child_sink import ChildSink, agent_event
from subagent_host.runs.state import EVENT_OVERHEAD_BYTES, RunEvent, event_bytes
from subagent_host.values.choices import PlanPriority, PlanStatus
from subagent_host.values.events import PlanEntry, PlanEvent

SECRET: Final = "s3cr3t-value-of-the-token"
AT: Final = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
CONVERTER: Final = make_converter()


def entry(content: str, status: PlanStatus = PlanStatus.PENDING) -> PlanEntry:
    return PlanEntry(content=content, priority=PlanPriority.MEDIUM, status=status)


async def test_a_plan_is_sent_redacted_after_the_text_said_before_it() -> None:
    sent: list[object] = []
    redaction = Redaction.of({"API_TOKEN": SECRET}, base64=False)
    sink = ChildSink(PiParser(), None, lambda _: None, sent.append, redaction)
    sink.open()
    plan = PlanUpdated((entry(f"use {SECRET}", PlanStatus.IN_PROGRESS), entry("test")))
    sink.report_events([MessageText("first I"), plan])
    [said, told] = sent
    assert said == MessageText("first I")
    assert isinstance(told, PlanUpdated)
    assert [e.content for e in told.entries] == ["use [redacted: 25 bytes]", "test"]
    assert told.entries[0].status is PlanStatus.IN_PROGRESS


def test_the_plan_event_on_the_wire_has_every_entry_and_reads_back() -> None:
    event = agent_event(2, PlanUpdated((entry("read", PlanStatus.COMPLETED), entry("write"))))
    assert event == PlanEvent(
        index=2, entries=(entry("read", PlanStatus.COMPLETED), entry("write"))
    )
    wire = EventWire(run_id="r1", seq=9, at=AT, event=event)
    written = CONVERTER.unstructure(wire)
    assert written == {
        "runId": "r1",
        "seq": 9,
        "type": "plan",
        "at": written["at"],
        "index": 2,
        "entries": [
            {"content": "read", "priority": "medium", "status": "completed"},
            {"content": "write", "priority": "medium", "status": "pending"},
        ],
    }
    assert CONVERTER.structure(written, EventWire) == wire
    stored = RunEvent(seq=9, at=AT, payload=event)
    assert event_bytes(stored) == EVENT_OVERHEAD_BYTES + len("readwrite")


def test_each_entry_is_bounded_and_an_empty_plan_is_told() -> None:
    events = NormalizedEvents()
    events.plan([entry("x" * (PLAN_ENTRY_CHARS + 5))])
    events.plan([])
    [long, empty] = events.drain(None)
    assert isinstance(long, PlanUpdated) and len(long.entries[0].content) == PLAN_ENTRY_CHARS
    assert empty == PlanUpdated(())
