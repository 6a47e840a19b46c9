"""How each end of a run reads as `subagent-host run`'s exit status (protocol.md §7)."""

from __future__ import annotations

from typing import Any

import pytest

from subagent_host.rpc.wire import RunSnapshot, make_converter
from subagent_host.terminal.run_follow import exit_status


def _snapshot(status: str, **fields: Any) -> RunSnapshot:
    child = {"index": 0, "backend": "command", "status": status, "attempt": 1}
    wire = {
        "runId": "r" * 32,
        "sessionId": "s",
        "kind": "single",
        "status": status,
        "createdAt": "2026-12-01T00:00:00.000Z",
        "fingerprint": "sha256:v1:" + "0" * 64,
        "lastSeq": 1,
        "admittedBy": "direct",
        "children": [{**child, **fields}],
    }
    return make_converter().structure(wire, RunSnapshot)


@pytest.mark.parametrize(
    ("snapshot", "code"),
    [
        (_snapshot("completed"), 0),
        (_snapshot("failed", exitCode=7, error={"code": "exit-status", "message": "m"}), 7),
        (_snapshot("failed", signal="SIGKILL", error={"code": "exit-status", "message": "m"}), 137),
        (_snapshot("failed", error={"code": "spawn-failed", "message": "m"}), 1),
        (_snapshot("timed-out"), 124),
        (_snapshot("limit-reached"), 125),
        (_snapshot("interrupted"), 75),
        (_snapshot("cancelled"), 143),
    ],
)
def test_each_way_a_run_ends_has_its_exit_status(snapshot: RunSnapshot, code: int) -> None:
    assert exit_status(snapshot) == code


def test_an_agent_that_failed_exits_1_whatever_its_cli_exited_with() -> None:
    snapshot = _snapshot(
        "failed", backend="pi", exitCode=3, error={"code": "exit-status", "message": "m"}
    )
    assert exit_status(snapshot) == 1
