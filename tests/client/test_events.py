"""`events(run_id)` and `wait(run_id)`: every event once, in order, in bounded memory."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from subagent_host.client import EventWire, Host, HostConnectionError
from subagent_host.client import events as client_events
from subagent_host.client.events import EventRouter
from subagent_host.values import RunStatus
from subagent_host.values.events import OutputEvent, StatusEvent, StderrEvent
from tests.client.conftest import memory_streams, started
from tests.waits import loop_turns

AT = datetime(2026, 12, 1, tzinfo=UTC)


def event(run_id: str, seq: int, text: str | None = None) -> EventWire:
    return EventWire(run_id=run_id, seq=seq, at=AT, event=OutputEvent(index=0, text=text or ""))


def test_an_events_own_fields_read_as_attributes_of_the_wire_event_none_where_it_has_none() -> None:
    """Code written when an event was one object with every field optional still reads it."""
    output = event("r1", 4, "hi")
    assert (output.type, output.index, output.text, output.status, output.usage) == (
        "output",
        0,
        "hi",
        None,
        None,
    )
    status = EventWire(run_id="r1", seq=5, at=AT, event=StatusEvent(status=RunStatus.COMPLETED))
    assert (status.status, status.index, status.text) == ("completed", None, None)


def test_events_of_runs_nobody_follows_are_kept_for_a_few_recent_runs_only() -> None:
    router = EventRouter()
    for run in range(10 * client_events.RECENT_RUNS):
        for seq in range(1, 2 * client_events.RECENT_EVENTS):
            router.publish(event(f"r{run}", seq))
    assert router.recent_runs == client_events.RECENT_RUNS
    newest = router.listen(f"r{10 * client_events.RECENT_RUNS - 1}").take_now()
    assert len(newest) == client_events.RECENT_EVENTS
    assert newest[-1].seq == 2 * client_events.RECENT_EVENTS - 1
    assert router.listen("r0").take_now() == []


def test_a_listener_that_falls_behind_keeps_its_newest_events_within_its_bytes() -> None:
    router = EventRouter()
    listener = router.listen("r")
    big = "x" * (client_events.LISTENER_BYTES // 4)
    for seq in range(1, 11):
        router.publish(event("r", seq, big))
    kept = listener.take_now()
    assert [e.seq for e in kept] == [8, 9, 10]  # 3 fit, the oldest are gone


async def test_events_that_arrived_before_iteration_are_yielded_then_it_ends_at_terminal(
    tmp_path: Path, framing: str
) -> None:
    async with started(tmp_path, framing) as (host, _seen):
        snap = await host.spawn(command=("echo", "hi"), mode="task", stream=True)
        seen = [e async for e in host.events(snap.run_id)]
        assert [e.seq for e in seen] == list(range(1, snap.last_seq + 1))
        last = seen[-1].event
        assert isinstance(last, StatusEvent) and last.status is RunStatus.COMPLETED
        assert OutputEvent(index=0, text="hi\n") in [e.event for e in seen]


async def test_a_streamed_commands_stderr_comes_as_stderr_events_apart_from_its_output(
    tmp_path: Path,
) -> None:
    script = "echo to stdout; echo to stderr >&2; echo more on stdout; echo more on stderr >&2"
    async with started(tmp_path) as (host, _seen):
        run = await host.spawn(command=("sh", "-c", script), stream=True)
        seen = [e async for e in host.events(run.run_id)]
        replayed = await host.status(run.run_id, since=0)
    texts = {
        kind.type: "".join(e.event.text for e in seen if isinstance(e.event, kind))
        for kind in (OutputEvent, StderrEvent)
    }
    assert texts == {
        "output": "to stdout\nmore on stdout\n",
        "stderr": "to stderr\nmore on stderr\n",
    }
    assert all(e.event.index == 0 for e in seen if isinstance(e.event, StderrEvent))
    assert replayed.events == tuple(seen)


async def test_a_run_whose_events_were_not_kept_is_read_back_with_status_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_events, "RECENT_RUNS", 1)
    async with started(tmp_path) as (host, _seen):
        first = await host.spawn(command=("echo", "1"), mode="task")
        await host.spawn(command=("echo", "2"), mode="task")  # pushes the first out
        seqs = [e.seq async for e in host.events(first.run_id)]
        assert seqs == list(range(1, first.last_seq + 1))
        after = [e.seq async for e in host.events(first.run_id, since=2)]
        assert after == list(range(3, first.last_seq + 1))


async def test_a_slow_follower_gets_every_event_once_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_events, "LISTENER_EVENTS", 2)
    async with started(tmp_path) as (host, _seen):
        script = "for i in $(seq 40); do echo $i; done"
        run = await host.spawn(command=("sh", "-c", script), stream=True)
        follower = host.events(run.run_id)
        first = await anext(follower)
        final = await host.wait(run.run_id)  # meanwhile the follower's backlog overflows
        rest = [e async for e in follower]
        assert [first.seq] + [e.seq for e in rest] == list(range(1, final.last_seq + 1))
        text = "".join(e.event.text for e in rest if isinstance(e.event, OutputEvent))
        assert text.split() == [str(i) for i in range(1, 41)]


async def test_a_run_followed_by_a_prefix_of_its_id_is_followed_to_its_end(tmp_path: Path) -> None:
    async with started(tmp_path) as (host, _seen):
        run = await host.spawn(command=("sh", "-c", "sleep 0.3; echo done"), stream=True)
        seen = [e async for e in host.events(run.run_id[:8])]
        assert [e.seq for e in seen] == list(range(1, seen[-1].seq + 1))
        last = seen[-1].event
        assert isinstance(last, StatusEvent) and last.status is RunStatus.COMPLETED


async def test_wait_returns_the_terminal_snapshot_of_a_background_run(tmp_path: Path) -> None:
    async with started(tmp_path) as (host, _seen):
        run = await host.spawn(command=("sh", "-c", "sleep 0.2; echo done"))
        assert run.status in ("queued", "running")
        final = await host.wait(run.run_id)
        assert final.status == "completed" and final.output is not None
        assert final.output.text == "done\n"
        assert (await host.wait(run.run_id)) == final  # already over: at once


async def test_following_a_run_ends_with_an_error_when_the_server_goes() -> None:
    reader, writer = memory_streams()
    async with Host.connect(reader, writer) as host:
        reader.feed_data(NOTIFICATION % b"1")
        await loop_turns()
        follower = host.events("r1")
        assert (await anext(follower)).seq == 1  # kept: no status call needed
        waiting = asyncio.create_task(host.ping())
        await loop_turns()
        reader.feed_eof()
        with pytest.raises(HostConnectionError, match="closed its output"):
            async for _event in follower:
                pass
        with pytest.raises(HostConnectionError):
            await waiting


async def test_bytes_that_are_not_a_message_end_the_connection() -> None:
    reader, writer = memory_streams()
    async with Host.connect(reader, writer, framing="lsp") as host:
        waiting = asyncio.create_task(host.ping())
        await loop_turns()
        reader.feed_data(b"Content-Length: 5\r\n\r\n{nope")
        with pytest.raises(HostConnectionError, match="not a message"):
            await waiting


NOTIFICATION = (
    b'{"jsonrpc":"2.0","method":"run/event","params":{"runId":"r1","seq":%b,'
    b'"type":"status","at":"2026-12-01T00:00:00.000Z","status":"queued"}}\n'
)
