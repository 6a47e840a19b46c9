"""What a streamed agent child sends (protocol.md §11): with `stream: true` its normalized
events (`message`, `tool`, `usage`) and activity, not its raw lines; with `"raw"` both,
and its stderr as `stderr` events; without `stream` only activity. A real process prints
a stream recorded from pi, and a line to stderr."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from subagent_host.backends.base import ItemSpec, Launch
from subagent_host.backends.pi import PiBackend
from subagent_host.planning.plan import ChildPlan, RunPlan
from subagent_host.planning.prepare import launch_plan
from subagent_host.runs.state import RunEvent, RunStatus, event_bytes
from subagent_host.values import RunKind
from subagent_host.values.events import (
    MessageEvent,
    OutputEvent,
    StderrEvent,
    ToolEvent,
    UsageEvent,
)
from tests.backends.conftest import processes_with_marker
from tests.runs.test_orchestrator import FAKES, Harness

RECORDED: Final = Path(__file__).resolve().parents[1] / "backends/fixtures/pi/narrated_tool.jsonl"
AGENT_TYPES: Final = {"message", "tool", "usage"}
NOTICE: Final = "a notice from the agent CLI\n"


class _ReplayingPi(PiBackend):
    """pi's parser, reading a stream recorded from pi, printed by `cat`; a notice on stderr."""

    def prepare(self, item: ItemSpec) -> Launch:
        script = f'cat "$0"; printf {NOTICE!r} >&2'
        return Launch(argv=("sh", "-c", script, str(RECORDED)), stdin=None, env={}, cwd=item.cwd)


def agent_child() -> ChildPlan:
    return ChildPlan(
        backend="pi", cwd=str(FAKES), timeout_ms=60_000, stall_timeout_ms=60_000, prompt="go"
    )


async def streamed_events(tmp_path: Path, stream: bool, raw: bool) -> list[RunEvent]:
    harness = Harness(more={"pi": _ReplayingPi(tmp_path)})
    plan = RunPlan(kind=RunKind.SINGLE, children=(agent_child(),), stream=stream, raw_output=raw)
    try:
        run = harness.orchestrator.launch(launch_plan(plan, harness.backends), "s1")
        harness.runs.append(run)
        await harness.finish(run)
        assert run.status is RunStatus.COMPLETED, run
        assert processes_with_marker(run.run_id) == []
        return harness.events_of(run)
    finally:
        await harness.orchestrator.shutdown("test over")


async def test_a_streamed_agent_sends_its_normalized_events_and_not_its_raw_lines(
    tmp_path: Path,
) -> None:
    events = await streamed_events(tmp_path, stream=True, raw=False)
    types = [event.type for event in events]
    assert "output" not in types and "stderr" not in types
    assert AGENT_TYPES <= set(types) and "activity" in types
    tools = [event.payload for event in events if isinstance(event.payload, ToolEvent)]
    assert [(t.phase, t.kind, t.name) for t in tools] == [
        ("start", "execute", "bash"),
        ("end", "execute", "bash"),
    ]
    assert tools[0].summary == "echo mock-tool-ran" and tools[1].is_error is False
    assert tools[0].is_error is None and tools[1].summary is None
    agents = [
        e.payload for e in events if isinstance(e.payload, MessageEvent | ToolEvent | UsageEvent)
    ]
    assert agents and all(payload.index == 0 for payload in agents)
    usage = [event.payload.usage for event in events if isinstance(event.payload, UsageEvent)][-1]
    assert usage.input_tokens > 0 and usage.cost_usd is not None and usage.cost_usd > 0


async def test_a_raw_stream_sends_the_clis_lines_as_well(tmp_path: Path) -> None:
    events = await streamed_events(tmp_path, stream=True, raw=True)
    output = "".join(
        event.payload.text for event in events if isinstance(event.payload, OutputEvent)
    )
    assert output == RECORDED.read_text()
    assert (
        "".join(event.payload.text for event in events if isinstance(event.payload, StderrEvent))
        == NOTICE
    )
    assert AGENT_TYPES <= {event.type for event in events}


@pytest.mark.parametrize("raw", [False, True])
async def test_an_agent_without_stream_sends_activity_only(tmp_path: Path, raw: bool) -> None:
    events = await streamed_events(tmp_path, stream=False, raw=raw)
    types = {event.type for event in events}
    assert "activity" in types and not (types & (AGENT_TYPES | {"output", "stderr"}))


async def test_a_message_event_weighs_its_text_like_an_output_event(tmp_path: Path) -> None:
    events = await streamed_events(tmp_path, stream=True, raw=False)
    message = next(
        event for event in events if isinstance(event.payload, MessageEvent) and event.payload.text
    )
    assert isinstance(message.payload, MessageEvent)
    text = message.payload.text
    output = RunEvent(seq=0, at=message.at, payload=OutputEvent(index=0, text=text))
    assert event_bytes(message) == event_bytes(output) > len(text)
