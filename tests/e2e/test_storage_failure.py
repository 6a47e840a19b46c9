"""A state directory or database the server cannot use: it serves with its history in memory.

Each case starts the real server on a state directory that cannot be used and
proves: it serves (`ping` says `persistence: "memory"`), runs work and are
listed, found and replayed from memory, `--history-limit` still bounds them,
approvals that need durable storage are refused with `persistence-unavailable`,
one WARNING line says why, the server exits 0 at EOF, nothing survives it, and
what was in the way is left exactly as it was.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from subagent_host.backends import cgroups
from tests.e2e.harness import error_of, result_of, running_server, state_args
from tests.e2e.test_durability import TREE, crash, spawn_running, wait_until_no_run_survives

DB_NAME: Final = "subagent-host.sqlite3"
SCHEMA_VERSION: Final = 3  # the server's (store/schema.py); a test of ours must not import it
LAUNCH_REJECTED: Final = -32003
RESUME_DENIED: Final = -32004
NOT_FOUND: Final = -32001
FAILING: Final = {"command": ["sh", "-c", "cat; exit 3"], "prompt": "first try"}


def under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "blocker").write_text("a file where the state directory would go")
    return tmp_path / "blocker" / "state"


def with_a_corrupt_database(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / DB_NAME).write_bytes(b"garbage, not an SQLite database\n" * 100)
    return state


def with_a_newer_schema(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    db = sqlite3.connect(state / DB_NAME)
    db.execute("CREATE TABLE future (x INTEGER)")
    db.execute("INSERT INTO future VALUES (42)")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    return state


CASES: Final[dict[str, tuple[Callable[[Path], Path], str]]] = {
    "under-a-file": (under_a_file, "Not a directory"),
    "corrupt-database": (with_a_corrupt_database, "file is not a database"),
    "newer-schema": (with_a_newer_schema, "newer than this server understands"),
}


def tree(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under `root` with its mode and, for a file, its bytes."""
    return {
        str(path): (path.stat().st_mode, path.read_bytes() if path.is_file() else None)
        for path in sorted(root.rglob("*"))
    }


# A starting server also ends what servers killed elsewhere on this machine left in
# their cgroups, and says so: a warning about other servers' leftovers, not its state.
GONE_SERVERS_SWEEP = "left in the cgroups of gone servers"


def warning_lines(stderr: str) -> list[str]:
    """The server's warnings, but for its sweep of gone servers' leftovers."""
    return [
        line
        for line in stderr.splitlines()
        if " WARNING " in line and GONE_SERVERS_SWEEP not in line
    ]


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_server_whose_state_dir_cannot_be_used_serves_with_its_history_in_memory(
    tmp_path: Path, case: str
) -> None:
    make, why = CASES[case]
    area = tmp_path / "area"
    area.mkdir()
    state = make(area)
    before = tree(area)
    scratch = tmp_path / "tmp"  # the server's TMPDIR: pi's session files go there
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}

    async with running_server(*state_args(state, "s1", "--history-limit", "2"), env=env) as server:
        ping = await result_of(server, "ping", {})
        assert ping["persistence"] == "memory"
        assert [p.name for p in scratch.iterdir()][0].startswith("subagent-host-pi-sessions-")

        first = await result_of(server, "spawn", {**FAILING, "mode": "task"})
        assert first["status"] == "failed"
        run_id = first["runId"]
        assert (await result_of(server, "status", {"runId": run_id[:8]}))["runId"] == run_id
        replay = await result_of(server, "status", {"runId": run_id, "since": 0})
        assert [e["seq"] for e in replay["events"]] == list(range(1, replay["lastSeq"] + 1))
        listing = await result_of(server, "status", {})
        assert [r["runId"] for r in listing["runs"]] == [run_id]

        # A launch is checked and described, but no id is issued that a spawn could carry.
        checked = await result_of(server, "preflight", {"command": ["true"]})
        assert checked["accepted"] is True and checked["fingerprint"].startswith("sha256:v1:")
        assert "preflightId" not in checked and "expiresAt" not in checked
        assert [(d["severity"], d["code"]) for d in checked["diagnostics"]] == [
            ("warning", "persistence-unavailable")
        ]
        refused = await error_of(server, "spawn", {"command": ["true"], "preflightId": "pf-x"})
        assert refused["code"] == LAUNCH_REJECTED
        assert [(d["code"], d["path"]) for d in refused["data"]["diagnostics"]] == [
            ("persistence-unavailable", "preflightId")
        ]

        # The failed run could be resumed with durable storage; here it cannot.
        approval = await result_of(
            server, "preflight", {"resume": {"runId": run_id, "message": "again"}}
        )
        assert approval["accepted"] is False and "token" not in approval
        assert [d["code"] for d in approval["diagnostics"]] == ["persistence-unavailable"]
        denied = await error_of(server, "resume", {"token": "rt-anything"})
        assert denied["code"] == RESUME_DENIED
        assert denied["data"] == {"reason": "not-resumable", "code": "persistence-unavailable"}
        assert "durable storage" in denied["message"]

        # --history-limit still bounds what memory holds.
        later = [(await result_of(server, "spawn", {**FAILING, "mode": "task"}))["runId"]]
        later.append((await result_of(server, "spawn", {**FAILING, "mode": "task"}))["runId"])
        listing = await result_of(server, "status", {})
        assert [r["runId"] for r in listing["runs"]] == later[::-1]
        assert (await error_of(server, "status", {"runId": run_id}))["code"] == NOT_FOUND

        assert (await server.finish())[0] == 0

    [warning] = warning_lines(server.stderr_text)
    assert str(state) in warning and why in warning and "in memory only" in warning
    assert tree(area) == before  # what was in the way is left as it was, byte for byte
    assert list(scratch.iterdir()) == []  # pi's session files went with the server

    # Nothing survives a restart: the next server knows none of those runs.
    async with running_server(*state_args(state, "s1"), env=env) as again:
        assert (await result_of(again, "status", {}))["runs"] == []
        assert (await error_of(again, "status", {"runId": later[-1]}))["code"] == NOT_FOUND
        assert (await again.finish())[0] == 0
    assert len(warning_lines(again.stderr_text)) == 1
    assert tree(area) == before


async def test_a_server_with_a_usable_state_dir_says_its_history_is_in_sqlite(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        assert (await result_of(server, "ping", {}))["persistence"] == "sqlite"
        checked = await result_of(server, "preflight", {"command": ["true"]})
        assert checked["preflightId"].startswith("pf-") and checked["diagnostics"] == []
        assert (await server.finish())[0] == 0
    assert warning_lines(server.stderr_text) == []


async def test_a_sigkilled_memory_only_servers_processes_are_ended_by_the_next_servers_sweep(
    tmp_path: Path,
) -> None:
    """No database records them, but their cgroup names their server: any later server
    that finds that server gone ends what is in it, in memory mode too."""
    if cgroups.find_hierarchy() is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    state = under_a_file(tmp_path)
    args = (*state_args(state), "--process-tracking", "cgroup")
    async with running_server(*args) as doomed:
        assert (await result_of(doomed, "ping", {}))["persistence"] == "memory"
        run_id = await spawn_running(doomed, TREE)
        orphaned = await crash(doomed)
    assert orphaned == {run_id}
    async with running_server(*args) as successor:
        await wait_until_no_run_survives(orphaned)
        assert (await result_of(successor, "status", {}))["runs"] == []
        assert (await successor.finish())[0] == 0
