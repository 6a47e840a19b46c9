"""A resume checks the agent CLI session it continues, with the real pinned CLIs and the mock LLM.

pi's session file lives in the state directory: its digest is sealed when an
attempt ends (or, for an attempt a server crash cut short, when the next
server recovers the run), and a resume needs the file there, by its real
path, unchanged. Claude Code's and codex's sessions are the user's: a resume
needs the file where the CLI will look. Otherwise the resume is refused at
`preflight {resume}` (`accepted: false`) and at `resume` (-32004
`not-resumable`, `data.code` naming why) and nothing starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.agents import PI_SPAWN, POLL_INTERVAL_S, server_args, wait_for_sleep
from tests.e2e.harness import EXIT_TIMEOUT_S, ServerProcess, error_of, result_of, running_server
from tests.e2e.resuming import PiServers, approved, approved_run, first_attempt, needs, resume_with
from tests.e2e.test_agent_clis import Cli, each_cli
from tests.e2e.test_durability import crash, wait_until_no_run_survives
from tests.e2e.test_resume import assert_nothing_started, execute, observe, refused
from tests.e2e.test_runs import next_event
from tests.mock_llm import KEYWORD_SLEEP_TOOL, MockLLM

pytestmark = pytest.mark.e2e
RESUME_DENIED: Final = -32004
DIGEST: Final = "sha256:"


def pi_session_file(tmp_path: Path, session_id: str) -> Path:
    (found,) = (tmp_path / "state" / "pi-sessions").glob(f"*_{session_id}.jsonl")
    return found


async def approved_once_cleaned_up(server: ServerProcess, run_id: str) -> dict[str, Any]:
    """Approved once the new server has ended what the crashed one left (until then a
    resume is refused: the leftovers are found by the run's marker, which it would carry)."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:  # the clean-up tells no client when it is done: ask, bounded
            result = await result_of(server, "preflight", {"resume": resume_with(run_id)})
            if result["accepted"]:
                return result
            assert [d["code"] for d in result["diagnostics"]] == ["still-running"], result
            await asyncio.sleep(POLL_INTERVAL_S)


async def assert_refused_both_ways(
    server: ServerProcess, run_id: str, token: str, code: str
) -> None:
    """A new preflight says why; the token issued before is denied; nothing starts."""
    before = await observe(server, run_id)
    result = await refused(server, resume_with(run_id), code)
    assert result["diagnostics"][0]["severity"] == "error", result
    error = await error_of(server, "resume", {"token": token, "mode": "task"})
    assert error["code"] == RESUME_DENIED, error
    assert (error["data"]["reason"], error["data"]["code"]) == ("not-resumable", code), error
    await assert_nothing_started(server, run_id, before)


# --- pi --------------------------------------------------------------------------------


@needs("pi")
async def test_a_pi_resume_is_sealed_with_the_session_files_digest_and_continues_that_file(
    tmp_path: Path, mock: MockLLM
) -> None:
    async with PiServers(tmp_path, mock).start() as server:
        run = await first_attempt(server, PI_SPAWN)
        session = run["children"][0]["backendSessionId"]
        contract = (await approved(server, run["runId"]))["contract"]
        assert contract["sessionDigest"].startswith(DIGEST), contract
        assert contract["sessionDigestSource"] == "attempt-end", contract
        token = (await approved(server, run["runId"]))["token"]
        resumed = await result_of(server, "resume", {"token": token, "mode": "task"})
        child = resumed["children"][0]
        assert (resumed["status"], child["attempt"]) == ("completed", 2), resumed
        assert child["backendSessionId"] == session
        # Sealed again at this attempt's end: the file grew, and a next resume matches it.
        again = (await approved(server, run["runId"]))["contract"]
        assert again["sessionDigest"] != contract["sessionDigest"], again
        await server.finish()
    assert "MANGO7" in mock.requests[-1].raw_body  # pi read the earlier turns from the file


async def assert_refused_once_tampered_with(
    tmp_path: Path, mock: MockLLM, tamper: Callable[[Path], None], code: str
) -> None:
    """A completed pi run approved for a resume, then its session file `tamper`ed with:
    refused both ways as `code`."""
    async with PiServers(tmp_path, mock).start() as server:
        run, token = await approved_run(server)
        tamper(pi_session_file(tmp_path, run["children"][0]["backendSessionId"]))
        await assert_refused_both_ways(server, run["runId"], token, code)
        await server.finish()


@needs("pi")
async def test_a_pi_resume_whose_session_file_is_gone_is_refused_as_session_missing(
    tmp_path: Path, mock: MockLLM
) -> None:
    await assert_refused_once_tampered_with(tmp_path, mock, Path.unlink, "session-missing")


@needs("pi")
async def test_a_pi_resume_whose_session_file_changed_is_refused_as_session_changed(
    tmp_path: Path, mock: MockLLM
) -> None:
    def write_after(session_file: Path) -> None:
        with session_file.open("a") as file:
            file.write('{"type":"message","note":"written after the attempt ended"}\n')

    await assert_refused_once_tampered_with(tmp_path, mock, write_after, "session-changed")


@needs("pi")
async def test_a_pi_session_file_symlinked_out_of_the_state_directory_is_refused(
    tmp_path: Path, mock: MockLLM
) -> None:
    def move_out(session_file: Path) -> None:
        outside = tmp_path / "elsewhere.jsonl"
        session_file.rename(outside)  # the same bytes, the same digest: only the place differs
        session_file.symlink_to(outside)

    await assert_refused_once_tampered_with(tmp_path, mock, move_out, "session-unsafe")


@needs("pi")
async def test_a_pi_attempt_cut_short_by_a_server_crash_resumes_from_the_recovered_file(
    tmp_path: Path, mock: MockLLM
) -> None:
    pi = PiServers(tmp_path, mock)
    async with pi.start() as server:
        spawn = {**PI_SPAWN, "prompt": f"{KEYWORD_SLEEP_TOOL} please", "stream": True}
        run_id = (await result_of(server, "spawn", spawn))["runId"]
        await next_event(server, "activity")  # the tool started: pi wrote its session
        await wait_for_sleep(run_id)
        taken = await crash(server)
    async with pi.start() as server:
        await wait_until_no_run_survives(taken)
        found = await result_of(server, "status", {"runId": run_id})
        assert found["status"] == "interrupted", found
        session = found["children"][0]["backendSessionId"]
        assert session, found  # recorded while the attempt ran
        result = await approved_once_cleaned_up(server, run_id)
        contract = result["contract"]
        assert contract["sessionDigestSource"] == "recovered", contract
        assert contract["backendSessionId"] == session
        resumed = await result_of(server, "resume", {"token": result["token"], "mode": "task"})
        child = resumed["children"][0]
        assert (resumed["status"], child["attempt"]) == ("completed", 2), child
        assert child["backendSessionId"] == session
        await server.finish()


@needs("pi")
async def test_a_pi_attempt_recorded_before_digests_were_kept_resumes_while_its_file_is_there(
    tmp_path: Path, mock: MockLLM
) -> None:
    pi = PiServers(tmp_path, mock)
    async with pi.start() as server:
        run = await first_attempt(server, PI_SPAWN)
        await server.finish()
    stripped = execute(
        tmp_path / "state",
        "UPDATE attempts SET record = json_remove(record, '$.session_digest',"
        " '$.session_digest_source') WHERE run_id = ?",
        run["runId"],
    )
    assert stripped == 1
    async with pi.start() as server:
        result = await approved(server, run["runId"])
        assert "sessionDigest" not in result["contract"], result  # nothing to compare with
        resumed = await result_of(server, "resume", {"token": result["token"], "mode": "task"})
        assert (resumed["status"], resumed["children"][0]["attempt"]) == ("completed", 2)
        sealed = (await approved(server, run["runId"]))["contract"]  # its new attempt is
        assert sealed["sessionDigestSource"] == "attempt-end", sealed
        await server.finish()


# --- claude and codex ------------------------------------------------------------------


# Where each CLI keeps the file of a session (below the test's own CLI homes).
SESSION_FILES: Final = {
    "claude": ("claude-config/projects", "*/{session}.jsonl"),
    "codex": ("codex-home/sessions", "*/*/*/rollout-*-{session}.jsonl"),
}


@each_cli(*SESSION_FILES)
async def test_a_resume_whose_cli_session_file_is_gone_is_refused(
    tmp_path: Path, mock: MockLLM, cli: Cli
) -> None:
    home, pattern = SESSION_FILES[cli.name]
    env = cli.mock_environment(tmp_path, mock)
    async with running_server(*server_args(tmp_path), env=env) as server:
        run, token = await approved_run(server, cli.spawn)
        session = run["children"][0]["backendSessionId"]
        (found,) = (tmp_path / home).glob(pattern.format(session=session))
        found.unlink()
        await assert_refused_both_ways(server, run["runId"], token, "session-missing")
        await server.finish()
