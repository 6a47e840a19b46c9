"""A state directory written by an earlier server stays good: same plans, same fingerprints,
its preflight ids admit their spawns and its resume tokens resume their runs.

`tests/fixtures/state_v1/` was written by the server of commit aae3849 (before
planning moved out of the handlers) with `tests/fixtures/make_state_v1.py`:
`expected.json` holds what that server answered, `state/` its SQLite state. The
fixture's preflight ids and tokens have expired since; a copy of the state gets
them a new expiry, nothing else (their fingerprints and digests are untouched).
That server wrote a few null members (a receipt's `version`, a contract's
projection's unset fields); the wire now leaves them out (protocol.md §12), and
everything else it shows is byte for byte what that server answered.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest

from subagent_host.rpc.wire import without_nulls
from tests.e2e.harness import ServerProcess, result_of, running_server, state_args

pytestmark = pytest.mark.e2e

FIXTURE: Final = Path(__file__).resolve().parents[1] / "fixtures" / "state_v1"
EXPECTED: Final[dict[str, Any]] = json.loads((FIXTURE / "expected.json").read_text())
LATER: Final = "2999-01-01T00:00:00+00:00"


def text(value: Any) -> str:
    """JSON text with keys in the order they were written, null members left out: equal
    texts, equal bytes."""
    return json.dumps(without_nulls(value), ensure_ascii=False)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    """A server on a copy of the fixture's state, in its session, with its stub CLI on PATH."""
    state = tmp_path / "state"
    shutil.copytree(FIXTURE / "state", state)
    state.chmod(0o700)
    with sqlite3.connect(state / "subagent-host.sqlite3") as db:
        db.execute("UPDATE preflights SET expires_at = ?", (LATER,))
        db.execute("UPDATE resume_tokens SET expires_at = ?", (LATER,))
    db.close()
    env = {**os.environ, "PATH": f"{FIXTURE / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    async with running_server(*state_args(state, EXPECTED["session"]), env=env, cwd="/") as server:
        yield server


@pytest.mark.parametrize("name", sorted(EXPECTED["launches"]))
async def test_a_launch_is_planned_fingerprinted_and_described_byte_for_byte_as_before(
    server: ServerProcess, name: str
) -> None:
    launch = EXPECTED["launches"][name]
    result = await result_of(server, "preflight", launch["params"])
    before = launch["preflight"]
    assert result["fingerprint"] == before["fingerprint"]
    for field in ("accepted", "diagnostics", "plan"):
        assert text(result[field]) == text(before[field]), field
    # The receipts say more now: what leaves the machine (protocol.md §14.2), and nothing else
    # changed.
    children = result["receipts"]["access"]["children"]
    egress = [child.pop("egress") for child in children]
    assert text(result["receipts"]) == text(before["receipts"])
    assert egress == [
        [{"kind": "unknown"}]
        if child["backend"] == "command"
        else [{"kind": "model-provider", "backend": child["backend"]}]
        for child in children
    ]


async def test_preflight_ids_issued_before_admit_their_spawns(server: ServerProcess) -> None:
    for name, launch in EXPECTED["launches"].items():
        if "runId" not in launch:  # an agent launch: only preflighted
            continue
        params = {**launch["params"], "mode": "task", "preflightId": launch["unusedPreflightId"]}
        run = await result_of(server, "spawn", params)
        assert run["status"] == "completed", (name, run)
        assert run["fingerprint"] == launch["preflight"]["fingerprint"], name


async def test_stored_projections_give_the_same_contracts_and_their_tokens_resume(
    server: ServerProcess,
) -> None:
    for name, resume in EXPECTED["resumes"].items():
        before = resume["approval"]
        again = await result_of(server, "preflight", {"resume": resume["resume"]})
        assert again["accepted"], (name, again)
        assert again["contractDigest"] == before["contractDigest"], name
        assert again["followUpDigest"] == before["followUpDigest"], name
        assert text(again["contract"]) == text(before["contract"]), name
        run = await result_of(server, "resume", {"token": before["token"], "mode": "task"})
        child = run["children"][resume["resume"]["index"]]
        assert run["status"] == "completed" and child["attempt"] == 2, (name, run)


async def test_a_stored_workflow_reports_its_command_step_as_command_and_its_record_is_kept(
    server: ServerProcess, tmp_path: Path
) -> None:
    run_id = EXPECTED["launches"]["workflow"]["runId"]
    database = tmp_path / "state" / "subagent-host.sqlite3"

    def record() -> str:
        with sqlite3.connect(database) as db:
            (found,) = db.execute("SELECT record FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        db.close()
        return str(found)

    before = record()
    run = await result_of(server, "status", {"runId": run_id})
    assert [step["kind"] for step in run["workflow"]["steps"]] == [
        "command",  # recorded as `prompt`: its one item runs `sh`
        "forEach",
        "parallel",
    ]
    assert record() == before and '"kind":"prompt"' in before
