"""A resume runs only the agent CLI that was approved, with the real pinned CLIs and the mock LLM.

An agent child's projection records the file its program was (real path,
digest, version) beside the argv it ran. Both `preflight {resume}` and `resume`
rebuild that launch and compare: another file at the path, another path (a
changed `backends.<cli>.executable`), another version, or another argv is
refused (`launch-changed`, naming what changed) and nothing starts — the file
that is not the approved one is not even asked its version. A projection
stored before programs were recorded resumes as it always did (`launchCheck:
"legacy"`).

The stand-in programs here are small wrappers that run the real pinned pi: a
wrapper's bytes are its digest, and it reads the version it reports from a file
beside it, so a version can change while the file stays the same.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.agents import AGENT_BIN, PI_SPAWN, server_args
from tests.e2e.harness import ServerProcess, error_of, result_of, running_server
from tests.e2e.resuming import PiServers, approved, approved_run, first_attempt, needs, resume_with
from tests.e2e.test_agent_clis import Cli, each_cli
from tests.e2e.test_resume import assert_nothing_started, change_projection, observe, refused
from tests.mock_llm import MockLLM

pytestmark = pytest.mark.e2e
RESUME_DENIED: Final = -32004
LAUNCH_CHANGED: Final = "launch-changed"


def file_digest(path: Path) -> str:
    return "sha256:v1:" + hashlib.sha256(path.read_bytes()).hexdigest()


def write_wrapper(script: Path, version_file: Path, ran: Path, note: str = "") -> Path:
    """A pi that records each start in `ran`, answers `--version` from `version_file`, and
    otherwise is the pinned pi. `note` changes its bytes, not what it does."""
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        "#!/bin/sh\n"
        f"# {note}\n"
        f"echo \"$$ $*\" >> '{ran}'\n"
        f"if [ \"$1\" = --version ]; then cat '{version_file}'; exit 0; fi\n"
        f"exec '{AGENT_BIN / 'pi'}' \"$@\"\n"
    )
    script.chmod(0o755)
    return script


def started(ran: Path) -> list[str]:
    """The starts a wrapper recorded (its `--version` probes among them)."""
    return ran.read_text().splitlines() if ran.exists() else []


class Wrapped(PiServers):
    """The servers of a test whose `pi` is a wrapper first on the PATH."""

    def __init__(self, tmp_path: Path, mock: MockLLM) -> None:
        self.bin = tmp_path / "bin"
        self.version = tmp_path / "pi-version"
        self.version.write_text("0.0.1-wrapped\n")
        self.ran = tmp_path / "ran"
        self.script = write_wrapper(self.bin / "pi", self.version, self.ran)
        super().__init__(tmp_path, mock)
        self.env["PATH"] = f"{self.bin}:{self.env['PATH']}"

    def replace(self, note: str) -> None:
        """Another file at the same path: written beside it, then renamed over it."""
        other = write_wrapper(self.bin / "pi.new", self.version, self.ran, note)
        os.replace(other, self.script)


async def resumes_as_attempt_2(server: ServerProcess, token: str) -> None:
    """The token runs the child's second attempt, which completes."""
    resumed = await result_of(server, "resume", {"token": token, "mode": "task"})
    assert (resumed["status"], resumed["children"][0]["attempt"]) == ("completed", 2), resumed


async def assert_launch_refused(
    server: ServerProcess, run_id: str, token: str, changed: list[str]
) -> dict[str, Any]:
    """A new preflight says what changed; the token issued before is denied with the same
    data; nothing starts. Returns the error's data."""
    before = await observe(server, run_id)
    result = await refused(server, resume_with(run_id), LAUNCH_CHANGED)
    (diagnostic,) = result["diagnostics"]
    assert diagnostic["severity"] == "error", diagnostic
    assert diagnostic["data"]["changed"] == changed, diagnostic
    error = await error_of(server, "resume", {"token": token, "mode": "task"})
    assert error["code"] == RESUME_DENIED, error
    assert error["data"]["reason"] == LAUNCH_CHANGED, error
    assert error["data"]["code"] == LAUNCH_CHANGED, error
    assert error["data"]["changed"] == changed, error
    assert error["data"]["expected"] == diagnostic["data"]["expected"], error
    assert error["data"]["actual"] == diagnostic["data"]["actual"], error
    await assert_nothing_started(server, run_id, before)
    data: dict[str, Any] = error["data"]
    return data


@each_cli()
async def test_a_resume_of_the_approved_cli_is_verified_and_runs(
    tmp_path: Path, mock: MockLLM, cli: Cli
) -> None:
    env = cli.mock_environment(tmp_path, mock)
    async with running_server(*server_args(tmp_path), env=env) as server:
        preflight = await result_of(server, "preflight", {**cli.spawn, "prompt": "remember MANGO7"})
        version = preflight["receipts"]["access"]["children"][0]["version"]
        run_id = (await first_attempt(server, cli.spawn))["runId"]
        result = await approved(server, run_id)
        contract = result["contract"]
        assert contract["launchCheck"] == "verified", contract
        program = (AGENT_BIN / cli.name).resolve()
        executable = contract["projection"]["executable"]
        assert executable == {
            "path": str(program),
            "digest": await asyncio.to_thread(file_digest, program),
            "version": version,
        }, executable
        await resumes_as_attempt_2(server, result["token"])
        await server.finish()


@needs("pi")
async def test_another_file_at_the_approved_path_is_refused_and_never_run(
    tmp_path: Path, mock: MockLLM
) -> None:
    pi = Wrapped(tmp_path, mock)
    run_id, token = await pi.approved_and_finished()
    approved_digest = file_digest(pi.script)
    pi.replace("another build")
    pi.ran.unlink()
    async with pi.start() as server:
        data = await assert_launch_refused(server, run_id, token, ["digest"])
        assert data["expected"] == {"digest": approved_digest}, data
        assert data["actual"] == {"digest": file_digest(pi.script)}, data
        await server.finish()
    # Never run, not even asked its version by the resume: the one start it saw is the
    # server's own probe at startup (the version `ping` lists).
    assert [line.split(" ", 1)[1] for line in started(pi.ran)] == ["--version"]


@needs("pi")
async def test_a_file_replaced_after_the_token_was_issued_is_refused_at_resume(
    tmp_path: Path, mock: MockLLM
) -> None:
    pi = Wrapped(tmp_path, mock)
    async with pi.start() as server:
        run, token = await approved_run(server)
        run_id = run["runId"]
        pi.replace("swapped in between")
        pi.ran.unlink()
        before = await observe(server, run_id)
        error = await error_of(server, "resume", {"token": token, "mode": "task"})
        assert error["code"] == RESUME_DENIED, error
        assert (error["data"]["reason"], error["data"]["changed"]) == (LAUNCH_CHANGED, ["digest"])
        await assert_nothing_started(server, run_id, before)
        await server.finish()
    assert started(pi.ran) == []


@needs("pi")
async def test_a_changed_configured_executable_is_refused(tmp_path: Path, mock: MockLLM) -> None:
    pi = Wrapped(tmp_path, mock)
    # The same bytes at another path: only where the program is differs (and so argv[0]).
    elsewhere = write_wrapper(tmp_path / "opt" / "pi", pi.version, pi.ran)
    configs = {}
    for name, program in (("first", pi.script), ("second", elsewhere)):
        configs[name] = tmp_path / f"{name}.json"
        configs[name].write_text(json.dumps({"backends": {"pi": {"executable": str(program)}}}))
    run_id, token = await pi.approved_and_finished("--config", str(configs["first"]))
    async with pi.start("--config", str(configs["second"])) as server:
        data = await assert_launch_refused(server, run_id, token, ["executable", "argv"])
        assert data["expected"]["executable"] == str(pi.script), data
        assert data["actual"]["executable"] == str(elsewhere), data
        assert data["expected"]["argv"][0] == str(pi.script), data
        assert data["actual"]["argv"] == [str(elsewhere), *data["expected"]["argv"][1:]], data
        await server.finish()


@needs("pi")
async def test_another_version_of_the_same_file_is_refused(tmp_path: Path, mock: MockLLM) -> None:
    pi = Wrapped(tmp_path, mock)
    run_id, token = await pi.approved_and_finished()
    pi.version.write_text("0.0.2-wrapped\n")
    async with pi.start() as server:
        data = await assert_launch_refused(server, run_id, token, ["version"])
        assert data["expected"] == {"version": "0.0.1-wrapped"}, data
        assert data["actual"] == {"version": "0.0.2-wrapped"}, data
        await server.finish()


async def stored_then_changed(
    pi: PiServers, change: Callable[[dict[str, Any]], None]
) -> tuple[str, str]:
    """A pi run, approved for a resume, then its stored projection changed and resealed (as
    another server version would have stored it): its run id and the token issued before."""
    run_id, token = await pi.approved_and_finished()
    state = pi.tmp_path / "state"
    await asyncio.to_thread(change_projection, state, run_id, 0, change, True)
    return run_id, token


@needs("pi")
async def test_a_stored_argv_the_adapter_no_longer_renders_is_refused(
    tmp_path: Path, mock: MockLLM
) -> None:
    def older_flags(projection: dict[str, Any]) -> None:  # as an adapter of another version
        projection["argvTemplate"] = [*projection["argvTemplate"], "--no-extensions"]

    pi = PiServers(tmp_path, mock)
    run_id, token = await stored_then_changed(pi, older_flags)
    async with pi.start() as server:
        data = await assert_launch_refused(server, run_id, token, ["argv"])
        assert data["expected"]["argv"][-1] == "--no-extensions", data
        assert data["actual"]["argv"] == data["expected"]["argv"][:-1], data
        await server.finish()


@needs("pi")
async def test_a_projection_stored_before_programs_were_recorded_resumes_as_legacy(
    tmp_path: Path, mock: MockLLM
) -> None:
    def as_stored_before(projection: dict[str, Any]) -> None:
        del projection["executable"]

    pi = PiServers(tmp_path, mock)
    run_id, token = await stored_then_changed(pi, as_stored_before)
    async with pi.start() as server:
        # The token issued for the verified contract no longer matches the legacy one.
        error = await error_of(server, "resume", {"token": token, "mode": "task"})
        assert error["data"]["reason"] == "mismatch", error
        result = await approved(server, run_id)
        contract = result["contract"]
        assert contract["launchCheck"] == "legacy", contract
        assert "executable" not in contract["projection"], contract
        await resumes_as_attempt_2(server, result["token"])
        await server.finish()


@needs("pi")
async def test_a_workflow_agent_child_is_recorded_and_verified_too(
    tmp_path: Path, mock: MockLLM
) -> None:
    workflow = {"name": "one-step", "task": "remember MANGO7", "chain": [{"prompt": "{task}"}]}
    async with PiServers(tmp_path, mock).start() as server:
        run = await result_of(server, "spawn", {**PI_SPAWN, "workflow": workflow, "mode": "task"})
        assert run["status"] == "completed", run
        contract = (await approved(server, run["runId"]))["contract"]
        assert contract["launchCheck"] == "verified", contract
        executable = contract["projection"]["executable"]
        assert executable["path"] == str((AGENT_BIN / "pi").resolve()), executable
        await server.finish()
