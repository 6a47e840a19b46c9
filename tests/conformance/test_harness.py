"""`subagent-host conformance` run for real: it passes against this server, and against
servers broken one way each (tests/fakes/broken_server.py) exactly the cases that see
the bug fail. Each run selects a few cases with -k, to keep the suite quick; CI runs
them all (.ci/run)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, Final

import pytest

from subagent_host.conformance.cases import all_cases
from subagent_host.conformance.selection import PatternError, compile_pattern

CASES: Final = all_cases()
ROOT: Final = Path(__file__).resolve().parents[2]
BROKEN: Final = f"{sys.executable} {ROOT / 'tests' / 'fakes' / 'broken_server.py'}"
RUN_TIMEOUT_S: Final = 240.0

pytestmark = pytest.mark.timeout(300)


async def conformance(tmp_path: Path, *args: str) -> tuple[int, str, dict[str, Any]]:
    """Run the harness; its exit status, its output and its --json results."""
    results = tmp_path / "results.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "subagent_host",
        "conformance",
        "--json",
        str(results),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT_S)
    except TimeoutError:
        proc.kill()  # the harness this test started
        await proc.wait()
        raise
    assert proc.returncode is not None
    loaded = json.loads(results.read_text()) if results.exists() else {}
    return proc.returncode, output.decode(), loaded


def verdicts(results: dict[str, Any], verdict: str) -> set[str]:
    return {case["id"] for case in results["cases"] if case["verdict"] == verdict}


async def test_every_selected_case_passes_against_this_server_in_both_framings(
    tmp_path: Path,
) -> None:
    pattern = (
        "(framing.lsp or framing.ndjson or framing.message-split or json.parse or batch.mixed"
        " or params.unknown or ping.result or stop.no-process or lifecycle.shutdown"
        " or lifecycle.exit-without or params.empty or initialize.lsp"
        " or interactive.queue-waits)"
    )
    code, output, results = await conformance(tmp_path, "-k", pattern)
    assert code == 0, output
    framings = {case["framing"] for case in results["cases"]}
    assert framings == {"ndjson", "lsp"}
    assert verdicts(results, "FAIL") == set()
    assert results["summary"]["skippedByPattern"] > 0
    assert re.search(r"^PASS lsp +framing\.lsp\.reply-headers §2\.2", output, re.M), output


@pytest.mark.parametrize(
    ("flag", "pattern", "failing"),
    [
        pytest.param(
            "--answer-notifications",
            "(jsonrpc.notification or jsonrpc.failing or cancel or batch.only or jsonrpc.id)",
            {
                "jsonrpc.notification-never-answered",
                "jsonrpc.failing-notification-never-answered",
                "cancel.unknown-id-does-nothing",
                "cancel.finished-request-does-nothing",
                "cancel.other-dollar-notifications-ignored",
            },
            id="a server that answers notifications",
        ),
        pytest.param(
            "--seq-gap",
            "(run.events or status.since or run.task or stop.already)",
            {
                "run.events-in-order",
                "status.since-zero-every-event-from-seq-1",
                "status.since-n-only-later-events",
            },
            id="a server with a gap in seq",
        ),
        pytest.param(
            "--stderr-as-output",
            "(run.stream)",
            {"run.stream-stderr-events"},
            id="a server that mixes a child's stderr into its output",
        ),
        pytest.param(
            "--lossy-ids",
            "(jsonrpc.id or ping.result or batch.mixed)",
            {"jsonrpc.id.integer-echoed", "jsonrpc.id.string-echoed"},
            id="a server that changes the type of ids",
        ),
    ],
)
async def test_against_a_broken_server_exactly_the_cases_that_see_the_bug_fail(
    tmp_path: Path, flag: str, pattern: str, failing: set[str]
) -> None:
    code, output, results = await conformance(
        tmp_path, "--framing", "ndjson", "--server", f"{BROKEN} {flag}", "-k", pattern
    )
    assert code == 1, output
    assert verdicts(results, "FAIL") == failing, output
    assert verdicts(results, "PASS"), output  # the rest of the selection passed
    for case_id in failing:
        assert re.search(
            rf"^FAIL ndjson {re.escape(case_id)} §[\d.]+: expected .+; seen ", output, re.M
        )


async def test_the_acp_cases_drive_the_harness_s_own_acp_agent_and_pass(tmp_path: Path) -> None:
    acp = {c.id for c in CASES if "acp" in c.keywords}
    assert len(acp) >= 11 and all(c.needs_agents for c in CASES if c.id in acp)
    code, output, results = await conformance(
        tmp_path, "--with-agents", "--framing", "lsp", "-k", "acp"
    )
    assert code == 0, output
    assert verdicts(results, "PASS") == acp, output


@pytest.mark.parametrize(
    ("flag", "pattern", "failing", "passing", "said"),
    [
        pytest.param(
            "--tool-kind-other",
            "acp.tool or acp.plan",
            {"acp.tool-turn"},
            {"acp.plan-event"},
            "the tool events' (phase, toolId, kind, isError)",
            id="a server that loses an ACP tool kind",
        ),
        pytest.param(
            "--ignore-access",
            "acp.policy or acp.narrowed",
            {"acp.policy-rejects-beyond-access", "acp.narrowed-access-needs-policy"},
            {"acp.policy-allows-within-access"},
            "the permission events (stage, kind, optionId, answeredBy) under read",
            id="a server that ignores access",
        ),
    ],
)
async def test_against_a_broken_server_exactly_the_acp_cases_that_see_the_bug_fail(
    tmp_path: Path, flag: str, pattern: str, failing: set[str], passing: set[str], said: str
) -> None:
    code, output, results = await conformance(
        tmp_path,
        "--with-agents",
        "--framing",
        "ndjson",
        "--server",
        f"{BROKEN} {flag}",
        "-k",
        pattern,
    )
    assert code == 1, output
    assert verdicts(results, "FAIL") == failing, output
    assert verdicts(results, "PASS") == passing, output
    assert said in output


async def test_a_stop_that_leaves_the_tree_alive_fails_the_stop_cases_and_nothing_survives(
    tmp_path: Path,
) -> None:
    code, output, results = await conformance(
        tmp_path,
        "--framing",
        "ndjson",
        "--server",
        f"{BROKEN} --fake-stop",
        "-k",
        "(stop.no-process or stop.escaped or stop.sig or stop.already or stop.reason or run.task)",
    )
    assert code == 1, output
    assert verdicts(results, "FAIL") == {
        "stop.no-process-left-behind",
        "stop.escaped-process-ended",
        "stop.sigkill-after-grace",
        "stop.sigterm-within-grace",
    }, output
    # The pids the harness saw alive after `stop` answered: it ended them itself, by pid.
    seen = next(c for c in results["cases"] if c["id"] == "stop.no-process-left-behind")["seen"]
    pids = [int(word) for word in re.findall(r"\d+", seen)]
    assert len(pids) == 3, seen
    left = [pid for pid in pids if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)  # by pid: processes of the runs this test caused
    assert left == []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


async def test_a_server_that_never_answers_fails_within_the_reply_timeout_and_is_ended(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "hung.pid"
    # Reads nothing, answers nothing, ignores end of input and SIGTERM: only SIGKILL ends it.
    hung = f"sh -c 'trap \"\" TERM; echo $$ > {pidfile}; exec sleep 600' hung"
    code, output, results = await conformance(
        tmp_path, "--framing", "lsp", "--server", hung, "--reply-timeout", "1", "-k", "ping.result"
    )
    assert code == 1, output
    assert verdicts(results, "FAIL") == {"ping.result-shape"}
    assert "nothing within 1 s" in output
    assert not _alive(int(pidfile.read_text())), "the harness left the hung server running"


async def test_cases_left_out_by_pattern_or_for_want_of_agents_do_not_count(
    tmp_path: Path,
) -> None:
    code, output, results = await conformance(tmp_path, "--framing", "ndjson", "-k", "agents")
    assert code == 0, output
    summary = results["summary"]
    assert summary["skippedNeedAgents"] >= 3
    assert summary["skippedByPattern"] == len(CASES) - sum(
        1 for c in CASES if compile_pattern("agents")(c.words())
    )
    assert "needing --with-agents" in output


async def test_nothing_selected_is_a_failure_not_a_pass(tmp_path: Path) -> None:
    code, output, _ = await conformance(tmp_path, "-k", "no-case-is-called-this")
    assert code == 1, output


def test_there_are_at_least_sixty_cases_each_citing_a_section() -> None:
    assert len(CASES) >= 60
    assert all(re.fullmatch(r"§\d+(\.\d+)?", case.section) for case in CASES)
    assert len({case.id for case in CASES}) == len(CASES)


def test_protocol_md_states_the_number_of_cases() -> None:
    """§21 says how many cases there are: the number the harness registers."""
    stated = re.search(r"cases \((\d+), each citing", (ROOT / "protocol.md").read_text())
    assert stated is not None
    assert int(stated.group(1)) == len(CASES)


@pytest.mark.parametrize(
    ("pattern", "words", "selected"),
    [
        ("stop", "stop.reason-kept §10", True),
        ("not agents", "agents.x §18 agents", False),
        ("stop and not agents", "stop.x §10", True),
        ("(ping or stop) and §10", "ping.x §5", False),
        ("ping stop", "ping.x §5", False),
        ("PING", "ping.x §5", True),
    ],
)
def test_a_k_pattern_reads_like_pytests(pattern: str, words: str, selected: bool) -> None:
    assert compile_pattern(pattern)(words.lower()) is selected


@pytest.mark.parametrize("pattern", ["(stop", "stop or", "and", "stop )"])
def test_a_malformed_k_pattern_is_refused(pattern: str) -> None:
    with pytest.raises(PatternError):
        compile_pattern(pattern)


async def test_the_servers_start_never_loads_the_harness(tmp_path: Path) -> None:
    probe = (
        "import sys, atexit\n"
        "atexit.register(lambda: print([m for m in sys.modules if 'conformance' in m],"
        " file=sys.stderr))\n"
        "from subagent_host.cli import main\n"
        "sys.exit(main(['--state-dir', sys.argv[1]]))\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        probe,
        str(tmp_path / "state"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(
        proc.communicate(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'), 60
    )
    assert b'"pong":true' in out
    assert err.decode().strip().splitlines()[-1] == "[]"


async def test_answers_are_validated_against_the_openrpc_schema_it_is_given(
    tmp_path: Path,
) -> None:
    # A schema whose ping result needs a member this server never sends.
    schema = tmp_path / "openrpc.json"
    pong = {
        "type": "object",
        "required": ["pong", "neverSent"],
        "properties": {"pong": {"const": True}},
    }
    schema.write_text(
        json.dumps(
            {
                "openrpc": "1.3.2",
                "info": {"title": "test", "version": "1"},
                "methods": [
                    {
                        "name": "ping",
                        "params": [],
                        "result": {"name": "pong", "schema": {"$ref": "#/components/schemas/Pong"}},
                    }
                ],
                "components": {"schemas": {"Pong": pong}},
            }
        )
    )
    code, output, results = await conformance(
        tmp_path, "--framing", "ndjson", "--schema", str(schema), "-k", "ping.result or run.task"
    )
    assert code == 1, output
    assert verdicts(results, "FAIL") == {"ping.result-shape"}, output
    assert "'neverSent' is a required property" in output
    assert f"shapes checked by OpenRPC schema ({schema})" in output


def test_a_relative_server_path_means_from_where_the_harness_was_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from subagent_host.conformance.command import _from_here

    monkeypatch.chdir(tmp_path)
    assert _from_here(".venv/bin/subagent-host") == str(tmp_path / ".venv/bin/subagent-host")
    assert _from_here("subagent-host") == "subagent-host"  # looked up on PATH, as a shell does
    assert _from_here("/usr/bin/env") == "/usr/bin/env"
