"""A streamed child's stderr as `stderr` events (protocol.md §11), over real stdio with real
command children: exactly what it wrote to stderr, never mixed into `output`, kept in the
run's history like `output` (replayed by `status {since}`, read back by a later server),
and none for a child that does not stream."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

from tests.e2e.harness import assert_conforming, result_of, running_server, state_args
from tests.e2e.test_runs import call

Json = dict[str, Any]
LINES: Final = 50
# Writes to stdout and stderr in turn, flushing each write, so that the server reads them
# interleaved; words, not runs of one letter (those are redacted, protocol.md §12.1). The
# last stderr write splits an `é` between two flushed writes.
INTERLEAVED: Final = f"""
import sys
for n in range({LINES}):
    sys.stdout.write(f"out line {{n}} of the child\\n")
    sys.stdout.flush()
    sys.stderr.write(f"err line {{n}}: a warning\\n")
    sys.stderr.flush()
sys.stderr.buffer.write(b"caf\\xc3")
sys.stderr.flush()
sys.stderr.buffer.write(b"\\xa9 at the end\\n")
sys.stderr.flush()
sys.exit(4)
"""
STDOUT: Final = "".join(f"out line {n} of the child\n" for n in range(LINES))
STDERR: Final = "".join(f"err line {n}: a warning\n" for n in range(LINES)) + "café at the end\n"


def texts(events: list[Json], event_type: str) -> str:
    return "".join(event["text"] for event in events if event["type"] == event_type)


async def test_a_streamed_commands_stderr_comes_as_stderr_events_and_its_stdout_as_output(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    spawn = {"command": [sys.executable, "-c", INTERLEAVED], "mode": "task", "stream": True}
    async with running_server(*state_args(state)) as server:
        request = {"jsonrpc": "2.0", "id": 1, "method": "spawn", "params": spawn}
        reply, notes = await call(server, "spawn", spawn)
        run = reply["result"]
        events = [note["params"] for note in notes if note.get("method") == "run/event"]
        replay = await result_of(server, "status", {"runId": run["runId"], "since": 0})
        assert await server.finish() == (0, [])
    assert_conforming([request], [*notes, reply])
    assert [event["seq"] for event in events] == list(range(1, run["lastSeq"] + 1))
    assert texts(events, "stderr") == STDERR
    assert texts(events, "output") == STDOUT
    assert all(event["index"] == 0 for event in events if event["type"] == "stderr")
    child = run["children"][0]
    assert (child["status"], child["exitCode"]) == ("failed", 4)
    assert child["output"]["text"] == STDOUT
    assert child["output"]["stderrTail"] == STDERR  # the tail is kept beside, as before
    # The history holds them as they were sent; a later server reads the same from disk.
    assert replay["events"] == events
    async with running_server(*state_args(state)) as server:
        again = await result_of(server, "status", {"runId": run["runId"], "since": 0})
        assert await server.finish() == (0, [])
    assert again["events"] == events


async def test_a_child_that_does_not_stream_sends_no_stderr_events(tmp_path: Path) -> None:
    spawn = {"command": [sys.executable, "-c", INTERLEAVED], "mode": "task"}
    async with running_server(*state_args(tmp_path / "state")) as server:
        reply, notes = await call(server, "spawn", spawn)
        run = reply["result"]
        replay = await result_of(server, "status", {"runId": run["runId"], "since": 0})
        assert await server.finish() == (0, [])
    sent = [note["params"] for note in notes if note.get("method") == "run/event"]
    assert {event["type"] for event in [*sent, *replay["events"]]} == {"status", "child"}
    assert run["children"][0]["output"]["stderrTail"] == STDERR
