"""`subagent-host logs RUN [-f]`: what a run's children printed and did, in order, and
following a run that another process runs until it ends (protocol.md §7)."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from subagent_host.values import RunStatus
from subagent_host.values.events import ChildEvent, OutputEvent
from tests.e2e.agents import AGENT_BIN, PI_SPAWN, pi_environment
from tests.mock_llm import KEYWORD_NARRATE_TOOL, NARRATION_TEXT, MockLLM
from tests.terminal.inspecting import (
    COMMAND_TIMEOUT_S,
    assert_plain,
    command,
    on_a_terminal,
    server,
    start,
    state,
    task,
)

pytestmark = pytest.mark.e2e

WAIT_FOR: Final = "for i in $(seq 1000); do [ -e {0} ] && break; sleep 0.01; done"
"""Shell: until file {0} exists (at most 10 s): how a child waits on the test, bounded."""


@pytest.fixture
def mock() -> Iterator[MockLLM]:
    """A loopback mock LLM for this test (tests/mock_llm), closed after it."""
    with MockLLM() as llm:
        yield llm


def wait_for(path: Path) -> str:
    return WAIT_FOR.format(path)


async def logs(tmp_path: Path, run_id: str, status: str = "completed") -> str:
    """What `logs` printed before its last line, the run's outcome (checked here)."""
    printed, outcome = await logs_and_outcome(tmp_path, run_id)
    assert re.fullmatch(rf"run {run_id[:8]} {status} after [0-9.hms]+", outcome), outcome
    return printed


async def logs_and_outcome(tmp_path: Path, run_id: str) -> tuple[str, str]:
    """What `logs` printed on a pipe before its last line, and that line."""
    finished = await command("logs", run_id, "--state-dir", str(state(tmp_path)))
    assert finished.status == 0 and finished.stderr == "", finished
    assert_plain(finished.stdout)
    printed, outcome = finished.stdout[:-1].rpartition("\n")[::2]
    return printed + "\n" if printed else "", outcome


async def test_logs_of_a_streamed_run_is_what_it_printed(tmp_path: Path) -> None:
    async with server(tmp_path, "alpha") as host:
        run = await task(
            host, command=["sh", "-c", "printf 'one\\ntwo'; sleep 0.1; echo ' and three'"],
            stream=True,
        )  # fmt: skip
    assert await logs(tmp_path, run["runId"][:8]) == "one\ntwo and three\n"


async def test_logs_of_a_run_that_did_not_stream_is_its_final_output(tmp_path: Path) -> None:
    async with server(tmp_path, "alpha") as host:
        run = await task(host, command=["printf", "first\\nlast"])
    assert await logs(tmp_path, run["runId"]) == "first\nlast\n"


@pytest.mark.parametrize("stream", [True, False])
async def test_logs_of_several_children_prefixes_each_line_and_keeps_their_order(
    tmp_path: Path, stream: bool
) -> None:
    a_said, release = tmp_path / "a-said", tmp_path / "release"
    # Child 0 speaks, child 1 speaks once it has and ends; child 0 then speaks again and
    # ends once the test saw child 1 end.
    first = f"echo a1; touch {a_said}; {wait_for(release)}; echo a2"
    second = f"{wait_for(a_said)}; echo b1"
    async with server(tmp_path, "alpha") as host:
        run = await host.request(
            "spawn",
            {
                "tasks": [{"command": ["sh", "-c", first]}, {"command": ["sh", "-c", second]}],
                "stream": stream,
            },
        )
        async with asyncio.timeout(COMMAND_TIMEOUT_S):
            async for event in host.events(run["runId"]):
                if event.event == ChildEvent(index=1, status=RunStatus.COMPLETED):
                    break
            release.touch()
            assert (await host.wait(run["runId"])).status == "completed"
    if stream:  # as it was printed
        assert await logs(tmp_path, run["runId"]) == "[0] a1\n[1] b1\n[0] a2\n"
    else:  # each child's output where it ended
        assert await logs(tmp_path, run["runId"]) == "[1] b1\n[0] a1\n[0] a2\n"


async def test_logs_of_a_failed_run_shows_its_stdout_its_stderr_marked_and_its_error(
    tmp_path: Path,
) -> None:
    async with server(tmp_path, "alpha") as host:
        run = await task(host, command=["sh", "-c", "echo out; echo warn >&2; exit 3"])
    printed, outcome = await logs_and_outcome(tmp_path, run["runId"])
    assert printed == "out\nstderr| warn\n"
    assert re.fullmatch(
        rf"run {run['runId'][:8]} failed after [0-9.hms]+: command exited with status 3: warn",
        outcome,
    ), outcome


async def test_a_completed_command_keeps_its_stderr_tail_and_logs_shows_it(
    tmp_path: Path,
) -> None:
    async with server(tmp_path, "alpha") as host:
        run = await task(host, command=["sh", "-c", "echo ok; echo note >&2"])
    child = run["children"][0]
    assert child["status"] == "completed" and child["output"]["stderrTail"] == "note\n"
    assert "error" not in child
    assert await logs(tmp_path, run["runId"]) == "ok\nstderr| note\n"
    shown = await on_a_terminal(100, "logs", run["runId"], "--state-dir", str(state(tmp_path)))
    assert "\x1b[31mstderr│ note" in shown, repr(shown)  # marked in red on a terminal


async def test_logs_of_a_stopped_run_shows_each_childs_stderr_and_the_stop_reason(
    tmp_path: Path,
) -> None:
    going = "echo going-{0}; echo trouble-{0} >&2; exec sleep 300"
    async with server(tmp_path, "alpha") as host:
        run = await host.request(
            "spawn",
            {
                "tasks": [{"command": ["sh", "-c", going.format(i)]} for i in range(2)],
                "stream": True,
            },
        )
        said = set()
        async with asyncio.timeout(COMMAND_TIMEOUT_S):
            async for event in host.events(run["runId"]):
                if isinstance(event.event, OutputEvent):
                    said.add(event.event.index)
                    if said == {0, 1}:
                        break
        stopped = await host.request("stop", {"runId": run["runId"]})
        assert stopped["status"] == "cancelled", stopped
    printed, outcome = await logs_and_outcome(tmp_path, run["runId"])
    lines = printed.splitlines()
    assert sorted(lines) == sorted(
        [f"[{i}] going-{i}" for i in range(2)] + [f"[{i}] stderr| trouble-{i}" for i in range(2)]
    ), lines
    for i in range(2):  # each child's stderr where it ended, after what it printed
        assert lines.index(f"[{i}] going-{i}") < lines.index(f"[{i}] stderr| trouble-{i}")
    assert re.fullmatch(
        rf"run {run['runId'][:8]} cancelled after [0-9.hms]+: {re.escape(stopped['reason'])}",
        outcome,
    ), outcome


async def test_logs_follow_prints_a_live_run_of_another_process_until_it_ends(
    tmp_path: Path,
) -> None:
    go_on, finish = tmp_path / "go-on", tmp_path / "finish"
    script = f"echo started; {wait_for(go_on)}; echo middle; {wait_for(finish)}; echo ended"
    async with server(tmp_path, "alpha") as host:
        run = await host.request(
            "spawn", {"command": ["sh", "-c", script], "stream": True, "label": "slow"}
        )
        follower = await start("logs", "-f", run["runId"], "--state-dir", str(state(tmp_path)))
        assert follower.stdout is not None
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT_S):
                assert await follower.stdout.readline() == b"started\n"
                go_on.touch()
                assert await follower.stdout.readline() == b"middle\n"
                assert follower.returncode is None  # still following: the run goes on
                finish.touch()
                assert await follower.stdout.readline() == b"ended\n"
                outcome = (await follower.stdout.read()).decode()
                assert outcome.startswith(f"run {run['runId'][:8]} completed after "), outcome
                assert outcome.count("\n") == 1
                assert await follower.wait() == 0
        finally:
            if follower.returncode is None:
                follower.kill()
                await follower.wait()
        assert (await host.request("status", {"runId": run["runId"]}))["status"] == "completed"
    assert follower.stderr is not None and await follower.stderr.read() == b""


async def test_logs_of_a_streamed_run_shows_its_stderr_in_order_marked_and_once(
    tmp_path: Path,
) -> None:
    script = "echo out one; echo err one >&2; echo out two; printf 'err two' >&2; exit 3"
    async with server(tmp_path, "alpha") as host:
        run = await task(host, command=["sh", "-c", script], stream=True)
    assert run["children"][0]["output"]["stderrTail"] == "err one\nerr two"  # kept too
    printed, _ = await logs_and_outcome(tmp_path, run["runId"])
    # Each stream in order, whole lines (two pipes read as they fill: which of them came
    # first is the server's reading, not the child's); not again from the stored tail.
    lines = printed.splitlines()
    assert sorted(lines) == sorted(["out one", "stderr| err one", "out two", "stderr| err two"])
    assert [line for line in lines if line.startswith("out")] == ["out one", "out two"]
    assert [line for line in lines if line.startswith("stderr")] == [
        "stderr| err one",
        "stderr| err two",
    ]


async def test_logs_follow_shows_a_live_runs_stderr_as_it_comes(tmp_path: Path) -> None:
    go_on = tmp_path / "go-on"
    script = f"echo started; echo a warning >&2; {wait_for(go_on)}; echo done >&2"
    async with server(tmp_path, "alpha") as host:
        run = await host.request("spawn", {"command": ["sh", "-c", script], "stream": True})
        follower = await start("logs", "-f", run["runId"], "--state-dir", str(state(tmp_path)))
        assert follower.stdout is not None and follower.stderr is not None
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT_S):
                assert await follower.stdout.readline() == b"started\n"
                # Shown while the child still waits for the test.
                assert await follower.stdout.readline() == b"stderr| a warning\n"
                assert follower.returncode is None
                go_on.touch()
                assert await follower.stdout.readline() == b"stderr| done\n"
                outcome = (await follower.stdout.read()).decode()
                assert outcome.startswith(f"run {run['runId'][:8]} completed after "), outcome
                assert await follower.wait() == 0
        finally:
            if follower.returncode is None:
                follower.kill()
                await follower.wait()
        assert await follower.stderr.read() == b""


async def test_logs_follow_ends_quietly_with_130_on_ctrl_c(tmp_path: Path) -> None:
    release = tmp_path / "release"
    async with server(tmp_path, "alpha") as host:
        run = await host.request(
            "spawn", {"command": ["sh", "-c", f"echo waiting; {wait_for(release)}"], "stream": True}
        )
        follower = await start("logs", "-f", run["runId"], "--state-dir", str(state(tmp_path)))
        assert follower.stdout is not None and follower.stderr is not None
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT_S):
                assert await follower.stdout.readline() == b"waiting\n"
                follower.send_signal(signal.SIGINT)
                assert await follower.wait() == 130
        finally:
            if follower.returncode is None:
                follower.kill()
                await follower.wait()
            release.touch()
        assert await follower.stderr.read() == b""
        assert (await host.wait(run["runId"])).status == "completed"


@pytest.mark.parametrize("stream", [True, False])
async def test_an_agent_childs_words_activity_and_output_are_logged_and_its_prompt_names_the_run(
    tmp_path: Path, mock: MockLLM, stream: bool
) -> None:
    if not (AGENT_BIN / "pi").exists():
        pytest.skip("the pinned pi CLI is not installed: run scripts/install-agents")
    env = pi_environment(tmp_path, mock.base_url)
    prompt = f"Look around with a tool, {KEYWORD_NARRATE_TOOL},\nthen say what you found"
    async with server(tmp_path, "alpha", env=env) as host:
        run = await task(host, **PI_SPAWN, prompt=prompt, stream=stream)
    assert run["status"] == "completed", run
    logged = (await logs(tmp_path, run["runId"])).splitlines()
    final = run["output"]["text"].strip()
    if stream:  # what it said as it streamed (its message events): before the tool too
        # A chunk's events are recorded before its activity: the narration is whole
        # before the tool's line, however pi's output was cut into chunks.
        assert logged[:2] == [NARRATION_TEXT, "» tool bash"]
        assert logged[2:] == [final]
    else:  # the activity as it happened, then the final text
        assert logged == ["» tool bash", final]
    listed = await command("runs", "--state-dir", str(state(tmp_path)))
    assert "pi: Look around with a tool," in listed.stdout and "then say" not in listed.stdout


async def test_logs_follow_says_so_and_exits_1_when_the_server_running_the_run_dies(
    tmp_path: Path,
) -> None:
    async with server(tmp_path, "alpha") as host:
        run = await host.request(
            "spawn", {"command": ["sh", "-c", "echo going; exec sleep 300"], "stream": True}
        )
        follower = await start("logs", "-f", run["runId"], "--state-dir", str(state(tmp_path)))
        assert follower.stdout is not None and follower.stderr is not None
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT_S):
                assert await follower.stdout.readline() == b"going\n"
                assert host.process is not None
                host.process.kill()  # the run is left running, its server gone
                assert await follower.wait() == 1
        finally:
            if follower.returncode is None:
                follower.kill()
                await follower.wait()
        assert (
            await follower.stderr.read()
            == (
                f"subagent-host logs: the server running {run['runId']} has ended without ending"
                " it (the next server started on this state directory marks it interrupted)\n"
            ).encode()
        )
        # The next server does: it ends the run's `sleep` (proven gone when both end).
        async with server(tmp_path, "alpha", "lsp") as after:
            assert (await after.request("status", {"runId": run["runId"]}))["status"] == (
                "interrupted"
            )
