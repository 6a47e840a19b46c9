"""Every protocol method through `Host`, against the real server in both framings."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from subagent_host.client import (
    Host,
    ResumeRequest,
    RunKind,
    RunList,
    RunSnapshot,
    RunStatus,
    StoppedBy,
)
from subagent_host.planning.views import ExecutionBoundary
from subagent_host.rpc.wire import (
    AgentsListResult,
    ClientInfo,
    InitializeResult,
    PingResult,
    PreflightResult,
    make_converter,
)
from subagent_host.values.choices import AdmittedBy, Effect, Persistence, TrackingMode
from tests.client.conftest import first_run_id, memory_streams, started

CONVERTER = make_converter()


def assert_read_back_exactly(seen: dict[int, Any], msg_id: int, kind: type[Any]) -> None:
    """The reply read into its wire type writes back to the very JSON the server sent."""
    raw = seen[msg_id]["result"]
    assert CONVERTER.unstructure(CONVERTER.structure(raw, kind)) == raw


async def test_every_method_answers_with_its_typed_result(tmp_path: Path, framing: str) -> None:
    async with started(tmp_path, framing, "--session", "s1") as (host, seen):
        hello = await host.initialize(client_info=ClientInfo(name="tests", version="1"))
        assert isinstance(hello, InitializeResult) and hello.protocol_version == "1"
        assert hello.session_id == "s1" and "spawn" in hello.capabilities.methods
        assert hello.capabilities.limits.max_queue >= 1
        info = await host.ping()
        assert isinstance(info, PingResult) and info.pong and info.session_id == "s1"
        assert "agents/list" in info.methods and info.limits.max_concurrency >= 1
        # Enumerated values are read as their enumeration's members, not bare strings.
        assert isinstance(info.process_tracking, TrackingMode)
        assert info.persistence is Persistence.SQLITE

        checked = await host.preflight(command=("echo", "hi"), label="greet")
        assert isinstance(checked, PreflightResult) and checked.accepted
        assert checked.plan is not None and checked.plan.children[0].argv == ("echo", "hi")
        assert checked.plan.kind is RunKind.SINGLE and checked.receipts is not None
        assert checked.receipts.access.execution_boundary is ExecutionBoundary.SHARED_USER
        assert {type(e) for e in checked.receipts.access.children[0].effects} == {Effect}
        assert checked.preflight_id is not None and checked.expires_at is not None

        snap = await host.spawn(
            command=("echo", "hi"), mode="task", preflight_id=checked.preflight_id, label="greet"
        )
        assert isinstance(snap, RunSnapshot) and snap.status is RunStatus.COMPLETED
        assert snap.children[0].output is not None and snap.children[0].output.text == "hi\n"
        assert snap.admitted_by is AdmittedBy.PREFLIGHT and snap.duration_ms is not None
        assert snap.children[0].stopped_by is StoppedBy.EXIT

        runs = await host.status()
        assert isinstance(runs, RunList) and [r.run_id for r in runs.runs] == [snap.run_id]
        assert runs.runs[0].status is RunStatus.COMPLETED and runs.runs[0].kind is RunKind.SINGLE
        again = await host.status(snap.run_id[:8], since=0)
        assert again.run_id == snap.run_id and again.events is not None
        assert [e.seq for e in again.events] == list(range(1, snap.last_seq + 1))

        sleeper = await host.spawn(command=("sleep", "30"))
        assert sleeper.status in ("queued", "running")
        stopped = await host.stop(run_id=sleeper.run_id, grace_ms=0, reason="enough")
        assert stopped.status == "cancelled" and stopped.reason == "enough"
        assert stopped.already_terminal is False

        agents = await host.agents_list()
        assert isinstance(agents, AgentsListResult) and agents.agents == ()

        failed = await host.spawn(command=("sh", "-c", "cat; exit 3"), prompt="x", mode="task")
        assert failed.status == "failed" and failed.error is not None
        approval = await host.preflight(resume=ResumeRequest(run_id=failed.run_id, message="y"))
        assert approval.accepted and approval.token and approval.contract is not None
        resumed = await host.resume(token=approval.token, mode="task")
        assert resumed.run_id == failed.run_id and resumed.children[0].attempt == 2

        replies = seen.replies()
    assert_read_back_exactly(replies, 1, InitializeResult)
    assert_read_back_exactly(replies, 2, PingResult)
    assert_read_back_exactly(replies, 3, PreflightResult)
    assert_read_back_exactly(replies, 4, RunSnapshot)
    assert_read_back_exactly(replies, 5, RunList)
    assert_read_back_exactly(replies, 6, RunSnapshot)
    assert_read_back_exactly(replies, 9, AgentsListResult)
    assert_read_back_exactly(replies, 11, PreflightResult)


async def test_a_waiting_task_is_handed_to_the_background_by_detach(tmp_path: Path) -> None:
    async with started(tmp_path) as (host, seen):
        task = asyncio.create_task(host.spawn(command=("sleep", "30"), mode="task"))
        run_id = await first_run_id(seen)
        await host.detach(run_id)
        snap = await task
        assert snap.run_id == run_id and snap.status in ("queued", "running")
        await host.stop(run_id=run_id, grace_ms=0)


async def test_an_unknown_keyword_is_a_type_error_before_anything_is_sent() -> None:
    reader, writer = memory_streams()
    async with Host.connect(reader, writer) as host:
        with pytest.raises(TypeError, match="colour"):
            await host.spawn(command=("echo",), colour="red")  # type: ignore[call-arg]
        assert writer.data == b""
