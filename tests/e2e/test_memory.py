"""Memory stays flat whatever the client does: bounded event history, flow control (issue 11)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any, Final

from tests.e2e.harness import result_of, running_server, state_args

FAKES: Final = Path(__file__).resolve().parent.parent / "fakes"
MIB: Final = 1024 * 1024
# The documented bound on a run's retained events (protocol.md §9).
EVENT_BUDGET: Final = 8 * MIB


def text_bytes(events: list[dict[str, Any]]) -> int:
    return sum(len(event.get("text", "").encode()) for event in events)


async def test_status_since_after_a_run_over_the_byte_budget_names_the_oldest_event_held(
    tmp_path: Path,
) -> None:
    args = state_args(tmp_path / "state")
    flood = [sys.executable, str(FAKES / "flood.py"), "12"]
    async with running_server(*args) as server:
        run = await result_of(server, "spawn", {"command": flood, "stream": True, "mode": "task"})
        assert run["status"] == "completed"
        replay = await result_of(server, "status", {"runId": run["runId"], "since": 0})
        first = replay["firstRetainedSeq"]
        events = replay["events"]
        assert first > 1 and events[0]["seq"] == first
        assert [e["seq"] for e in events] == list(range(first, run["lastSeq"] + 1))
        assert text_bytes(events) <= EVENT_BUDGET
        assert len(json.dumps(replay)) < EVENT_BUDGET + MIB
        # Asking from the oldest event held, or for nothing, is no gap: no firstRetainedSeq.
        rest = await result_of(server, "status", {"runId": run["runId"], "since": first - 1})
        assert "firstRetainedSeq" not in rest and rest["events"] == events
        none = await result_of(server, "status", {"runId": run["runId"], "since": run["lastSeq"]})
        assert "firstRetainedSeq" not in none and none["events"] == []
        await server.finish()

    db = sqlite3.connect(tmp_path / "state" / "subagent-host.sqlite3")
    try:
        held, oldest, stored = db.execute(
            "SELECT count(*), min(seq),"
            " sum(length(CAST(json_extract(record, '$.fields.text') AS BLOB)))"
            " FROM events WHERE run_id = ?",
            (run["runId"],),
        ).fetchone()
    finally:
        db.close()
    assert oldest == first and held == run["lastSeq"] - first + 1
    assert stored <= EVENT_BUDGET

    async with running_server(*args) as later:  # from disk, the same answer
        again = await result_of(later, "status", {"runId": run["runId"], "since": 0})
        assert again["firstRetainedSeq"] == first and again["events"] == events
        await later.finish()
