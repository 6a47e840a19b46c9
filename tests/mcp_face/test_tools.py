"""The tools' schemas and arguments: the wire's types, read by the wire's converter."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Final

import attrs
import mcp_types as types
import pytest

from subagent_host.mcp_face.arguments import SpawnArguments
from subagent_host.mcp_face.render import run_text, waits_for_input
from subagent_host.mcp_face.server import describe
from subagent_host.mcp_face.tools import REPLAY_ONLY, TOOLS, BadArguments, read_arguments
from subagent_host.planning.request import LaunchRequest
from subagent_host.rpc.wire import ChildSnapshot, RunSnapshot, StopParams
from subagent_host.values import RunKind, RunStatus
from subagent_host.values.choices import AdmittedBy, ToolKind, TurnState
from subagent_host.values.facts import OutputInfo
from subagent_host.values.interaction import PendingPermission, TurnInfo
from subagent_host.values.wire_names import wire_name


def test_spawn_offers_every_launch_field_but_mode_and_stream_and_adds_wait_seconds() -> None:
    offered = set(TOOLS["spawn"].input_schema()["properties"])
    launch = {wire_name(field) for field in attrs.fields(LaunchRequest)}
    assert offered == launch - {"mode", "stream"} | {"waitSeconds"}
    assert TOOLS["spawn"].input_schema()["properties"]["waitSeconds"]["maximum"] == 50


def test_arguments_are_read_strictly_in_the_wire_s_words() -> None:
    spawn = read_arguments(TOOLS["spawn"], {"command": ["echo", "hi"], "waitSeconds": 5})
    assert spawn == SpawnArguments(command=("echo", "hi"), wait_seconds=5)
    assert read_arguments(TOOLS["stop"], {"runId": "abc", "graceMs": 0}) == StopParams(
        run_id="abc", grace_ms=0
    )
    with pytest.raises(BadArguments) as wrong:
        read_arguments(TOOLS["spawn"], {"command": ["true"], "waitSeconds": "5", "cwdd": "/"})
    assert wrong.value.message == (
        "invalid params: waitSeconds: expected an integer, got a string; "
        "cwdd: unknown field (did you mean cwd?)"
    )
    with pytest.raises(BadArguments) as offered:
        read_arguments(TOOLS["spawn"], {"command": ["true"], "stream": True})
    assert offered.value.message == "invalid params: stream: unknown field"
    with pytest.raises(BadArguments):
        read_arguments(TOOLS["wait"], {})


def running(*children: ChildSnapshot) -> RunSnapshot:
    """A running run `r1` of these children."""
    return RunSnapshot(
        run_id="r1",
        session_id="s",
        kind=RunKind.SINGLE,
        status=RunStatus.RUNNING,
        created_at=datetime(2026, 12, 2, tzinfo=UTC),
        fingerprint="sha256:v1:0",
        last_seq=2,
        children=children,
        admitted_by=AdmittedBy.DIRECT,
    )


def test_a_running_run_s_text_says_to_wait_and_a_finished_one_s_shows_its_output() -> None:
    run = running()
    assert run_text(run) == (
        "run r1 (single): running\nstill going: call wait with runId r1 (or stop it)"
    )
    output = OutputInfo(text="hi\n", truncated=False, bytes=3, lines=1, partial=False)
    done = attrs.evolve(
        run,
        status=RunStatus.COMPLETED,
        outcome=attrs.evolve(run.outcome, duration_ms=1500, output=output),
    )
    assert run_text(done) == "run r1 (single): completed in 1.5 s\noutput:\nhi\n"


def test_an_interactive_run_s_text_says_it_waits_for_input_and_what_it_waits_on() -> None:
    child = ChildSnapshot(
        index=0,
        backend="claude",
        status=RunStatus.RUNNING,
        attempt=1,
        turn=TurnInfo(count=2, state=TurnState.WAITING),
    )
    run = running(child)
    assert waits_for_input(run)
    assert run_text(run) == (
        "run r1 (single): running\n"
        "waiting for input: call send with runId r1 and a text (or close it)\n"
        "child 0 (claude): running, turn 2, waiting for input"
    )
    asking = attrs.evolve(
        run,
        children=(attrs.evolve(child, turn=TurnInfo(count=2, state=TurnState.RUNNING)),),
        pending_permissions=(
            PendingPermission(
                index=0,
                permission_id="p1",
                name="Bash",
                kind=ToolKind.EXECUTE,
                summary="rm -r build",
                options=(),
            ),
        ),
    )
    assert not waits_for_input(asking)
    assert run_text(asking) == (
        "run r1 (single): running\n"
        "still going: call wait with runId r1 (or stop it)\n"
        "child 0 (claude): running, turn 2, working\n"
        "child 0 asks to use Bash (execute): rm -r build"
    )
    closed = attrs.evolve(
        run, status=RunStatus.COMPLETED, children=(attrs.evolve(child, status=RunStatus.COMPLETED),)
    )
    assert not waits_for_input(closed)
    assert (
        run_text(closed) == "run r1 (single): completed\nchild 0 (claude): completed after 2 turns"
    )


# tools/list is what an MCP client loads of every server when it starts: 80.6 KB when each
# RunSnapshot schema carried `status {since}`'s events, 64.7 KB without; 72.2 KB once an
# output carries a command's `stderrTail`; 83.1 KB once a snapshot carries an interactive
# child's `turn` and the run's `pendingPermissions`, and a launch `interactive`, `approvals`
# and their timeouts; 102.2 KB with the tools `send` and `interrupt` (1.5 KB each) and
# `close` (16.4 KB: it answers a RunSnapshot, whose schema each tool holds whole); 105.7 KB
# once `agents_list` also lists the configured ACP agents (each a BackendInfo with what
# the agent answered to `initialize`).
TOOLS_LIST_BOUND: Final = 107_000


def tools_list_bytes() -> int:
    """The size of the `tools/list` result as the SDK writes it."""
    listed = types.ListToolsResult(tools=[describe(tool) for tool in TOOLS.values()])
    return len(listed.model_dump_json(by_alias=True, exclude_none=True).encode())


def test_tools_list_stays_small() -> None:
    assert tools_list_bytes() < TOOLS_LIST_BOUND


def test_each_tool_schema_holds_each_type_once() -> None:
    """Types are shared under `$defs` and referenced (`#/$defs/NAME`), never written out
    again: no object schema occurs twice in one tool's schema."""
    for tool in TOOLS.values():
        for schema in (tool.input_schema(), tool.output_schema()):
            objects = Counter(
                json.dumps(node, sort_keys=True)
                for node in _nodes(schema)
                if isinstance(node, dict) and "properties" in node
            )
            twice = [text[:120] for text, count in objects.items() if count > 1]
            assert twice == [], tool.name
            assert all(ref.startswith("#/$defs/") for ref in _refs(schema))


def test_results_leave_out_what_only_status_since_answers() -> None:
    for tool in TOOLS.values():
        schema = tool.output_schema()
        for body in schema.get("oneOf", [schema]):
            assert set(REPLAY_ONLY).isdisjoint(body["properties"]), tool.name
        assert "EventWire" not in schema.get("$defs", {}), tool.name


def _nodes(value: Any) -> Iterator[Any]:
    yield value
    children = (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    )
    for child in children:
        yield from _nodes(child)


def _refs(schema: Any) -> list[str]:
    return [node["$ref"] for node in _nodes(schema) if isinstance(node, dict) and "$ref" in node]
