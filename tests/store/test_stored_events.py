"""Events are stored as every earlier version stored them: `type`, `at`, snake_case `fields`.

The records below are written byte for byte as the store wrote them before events were
typed; each reads back into its class, and is written again as it was.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Final

import pytest

from subagent_host.runs.state import RunEvent
from subagent_host.store.records import dumps
from subagent_host.store.rows import event_from_record, event_record, stored_event
from subagent_host.values import RunStatus
from subagent_host.values.choices import (
    DeliveryState,
    OptionKind,
    PermissionStage,
    PlanPriority,
    PlanStatus,
)
from subagent_host.values.events import (
    EVENT_TYPES,
    ActivityEvent,
    ChildEvent,
    Event,
    InputEvent,
    MessageEvent,
    OutputEvent,
    PermissionEvent,
    Phase,
    PlanEntry,
    PlanEvent,
    StatusEvent,
    StderrEvent,
    ToolEvent,
    ToolKind,
    TurnEvent,
    UsageEvent,
)
from subagent_host.values.facts import OutputInfo, Usage
from subagent_host.values.interaction import PermissionOption

AT: Final = datetime(2026, 12, 4, 21, 0, 0, 123456, tzinfo=UTC)
STAMP: Final = '"at":"2026-12-04T21:00:00.123456+00:00"'

STORED: Final[list[tuple[str, Event]]] = [
    (
        '{"type":"status",' + STAMP + ',"fields":{"status":"queued"}}',
        StatusEvent(status=RunStatus.QUEUED),
    ),
    (
        '{"type":"status",' + STAMP + ',"fields":{"status":"failed","output":{"text":"so",'
        '"truncated":false,"bytes":2,"lines":0,"partial":true,"stderr_tail":null}}}',
        StatusEvent(
            status=RunStatus.FAILED,
            output=OutputInfo(text="so", truncated=False, bytes=2, lines=0, partial=True),
        ),
    ),
    (
        '{"type":"child",' + STAMP + ',"fields":{"index":1,"status":"running"}}',
        ChildEvent(index=1, status=RunStatus.RUNNING),
    ),
    (
        '{"type":"output",' + STAMP + ',"fields":{"index":0,"text":"hi\\n"}}',
        OutputEvent(index=0, text="hi\n"),
    ),
    (
        '{"type":"stderr",' + STAMP + ',"fields":{"index":0,"text":"é"}}',
        StderrEvent(index=0, text="é"),
    ),
    (
        '{"type":"activity",' + STAMP + ',"fields":{"index":2,"text":"» bash"}}',
        ActivityEvent(index=2, text="» bash"),
    ),
    (
        '{"type":"message",' + STAMP + ',"fields":{"index":0,"text":"a"}}',
        MessageEvent(index=0, text="a"),
    ),
    (
        '{"type":"message",' + STAMP + ',"fields":{"index":0,"text":"","final":true}}',
        MessageEvent(index=0, text="", final=True),
    ),
    (
        '{"type":"tool",' + STAMP + ',"fields":{"index":0,"phase":"start","tool_id":"t1",'
        '"name":"bash","kind":"execute","summary":"ls"}}',
        ToolEvent(
            index=0,
            phase=Phase.START,
            tool_id="t1",
            name="bash",
            kind=ToolKind.EXECUTE,
            summary="ls",
        ),
    ),
    (
        '{"type":"tool",' + STAMP + ',"fields":{"index":0,"phase":"end","tool_id":"t1",'
        '"name":"bash","kind":"execute","is_error":false}}',
        ToolEvent(
            index=0,
            phase=Phase.END,
            tool_id="t1",
            name="bash",
            kind=ToolKind.EXECUTE,
            is_error=False,
        ),
    ),
    (
        '{"type":"usage",' + STAMP + ',"fields":{"index":0,"usage":{"input_tokens":3,'
        '"output_tokens":4,"cache_read_tokens":0,"cache_write_tokens":0}}}',
        UsageEvent(index=0, usage=Usage(3, 4, 0, 0)),
    ),
    (
        '{"type":"turn",' + STAMP + ',"fields":{"index":0,"phase":"end",'
        '"stop_reason":"interrupted"}}',
        TurnEvent(index=0, phase=Phase.END, stop_reason="interrupted"),
    ),
    (
        '{"type":"input",' + STAMP + ',"fields":{"index":1,"message_id":"m1",'
        '"state":"queued","text":"and then?"}}',
        InputEvent(index=1, message_id="m1", state=DeliveryState.QUEUED, text="and then?"),
    ),
    (
        '{"type":"permission",' + STAMP + ',"fields":{"index":0,"permission_id":"p1",'
        '"stage":"answered","name":"Write","kind":"edit","summary":"a.txt","options":'
        '[{"option_id":"allow","name":"Allow","kind":"allow-once"}],"option_id":"allow",'
        '"answered_by":"client:vscode"}}',
        PermissionEvent(
            index=0,
            permission_id="p1",
            stage=PermissionStage.ANSWERED,
            name="Write",
            kind=ToolKind.EDIT,
            summary="a.txt",
            options=(PermissionOption("allow", "Allow", OptionKind.ALLOW_ONCE),),
            option_id="allow",
            answered_by="client:vscode",
        ),
    ),
    (
        '{"type":"plan",' + STAMP + ',"fields":{"index":0,"entries":[{"content":"read",'
        '"priority":"high","status":"completed"},{"content":"write","priority":"low",'
        '"status":"in_progress"}]}}',
        PlanEvent(
            index=0,
            entries=(
                PlanEntry(content="read", priority=PlanPriority.HIGH, status=PlanStatus.COMPLETED),
                PlanEntry(
                    content="write", priority=PlanPriority.LOW, status=PlanStatus.IN_PROGRESS
                ),
            ),
        ),
    ),
]


@pytest.mark.parametrize(("record", "payload"), STORED, ids=[text[9:20] for text, _ in STORED])
def test_an_event_is_stored_as_earlier_versions_stored_it_and_reads_back(
    record: str, payload: Event
) -> None:
    event = RunEvent(seq=4, at=AT, payload=payload)
    assert dumps(event_record(event)) == record
    assert stored_event(event).record == record
    read = event_from_record(4, json.loads(record))
    assert read == event
    if isinstance(read.payload, PermissionEvent):  # nested values come back typed too
        assert read.payload.options[0].kind is OptionKind.ALLOW_ONCE
    if isinstance(read.payload, PlanEvent):
        assert read.payload.entries[1].status is PlanStatus.IN_PROGRESS
        assert read.payload.entries[1].priority is PlanPriority.LOW


def test_every_event_type_has_a_stored_record_here() -> None:
    assert {type(payload) for _, payload in STORED} == set(EVENT_TYPES)
