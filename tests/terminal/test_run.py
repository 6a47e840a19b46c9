"""`subagent-host run` end to end: the real command, a real server under it, real children;
exit statuses, output, `--json`, Ctrl-C through a real pseudo-terminal, an agent (pi)
against the loopback mock LLM. Each test proves that no process survives it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import shlex
import signal
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import attrs
import psutil
import pytest

from subagent_host.store.browse import StateBrowser
from subagent_host.store.schema import DB_NAME
from tests.e2e.agents import AGENT_BIN, consent_required, pi_environment
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    assert_no_run_survives,
    assert_snapshot_table,
    message_checker,
    nulls_in,
    server_executable,
)
from tests.mock_llm import FINAL_TEXT_PREFIX, KEYWORD_ANSWER_NOW, MockLLM

pytestmark = pytest.mark.e2e

POLL_S: Final = 0.05  # between two looks at a file a child writes: bounded by EXIT_TIMEOUT_S


@attrs.frozen
class Ended:
    status: int
    stdout: bytes
    stderr: bytes


def run_argv(state_dir: Path, *args: str) -> list[str]:
    return [server_executable(), "run", "--state-dir", str(state_dir), *args]


async def run(
    state_dir: Path, *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> Ended:
    """`subagent-host run ARGS` with stdout and stderr on pipes; then nothing survives."""
    process = await asyncio.create_subprocess_exec(
        *run_argv(state_dir, *args),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    try:
        async with asyncio.timeout(EXIT_TIMEOUT_S * 3):
            stdout, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()  # by pid: the one process this test started
            await process.wait()
    assert b"Traceback" not in stderr, stderr.decode()
    assert_nothing_survives(state_dir)
    assert process.returncode is not None
    # Never a server's log line, even on a busy host whose servers warn of what servers of
    # other tests left behind: those are in the state directory's server.log.
    return Ended(process.returncode, stdout, stderr)


def assert_nothing_survives(state_dir: Path) -> None:
    """No process of a run recorded in `state_dir`, and no server on it, is alive."""
    if (state_dir / DB_NAME).exists():
        with StateBrowser.open(state_dir) as browser:
            assert_no_run_survives({found.run.run_id for found in browser.runs(limit=1000)})
    servers = [p.pid for p in psutil.process_iter() if _serves(p, state_dir)]
    assert servers == [], f"servers on {state_dir} left behind: {servers}"


def _serves(process: psutil.Process, state_dir: Path) -> bool:
    try:
        command = process.cmdline()
        return str(state_dir) in command and "run" not in command[:3]
    except psutil.Error:
        return False


def only_run(state_dir: Path) -> Any:
    with StateBrowser.open(state_dir) as browser:
        runs = browser.runs(limit=10)
        assert len(runs) == 1, runs
        return runs[0].run


async def test_a_completed_command_exits_0_with_exactly_its_stdout_and_a_quiet_stderr(
    tmp_path: Path,
) -> None:
    # More lines than a snapshot's output keeps (600): what is printed is the whole stdout.
    script = "printf 'h\\303\\251llo\\n'; seq 1 3000; printf 'no newline at the end'"
    ended = await run(
        tmp_path / "state", "--", "sh", "-c", script, env={**os.environ, "FORCE_COLOR": "1"}
    )
    expected = "héllo\n" + "".join(f"{n}\n" for n in range(1, 3001)) + "no newline at the end"
    assert (ended.status, ended.stdout.decode()) == (0, expected)
    # Not a terminal: no progress line, even with FORCE_COLOR; no error either.
    assert ended.stderr == b""
    assert only_run(tmp_path / "state").status == "completed"


async def test_a_reader_that_has_gone_ends_it_as_sigpipe_would_without_a_traceback(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read what it prints
    try:
        process = await asyncio.create_subprocess_exec(
            *run_argv(state_dir, "--", "seq", "1", "100000"),
            stdout=write_end,
            stderr=asyncio.subprocess.PIPE,
        )
    finally:
        os.close(write_end)
    async with asyncio.timeout(EXIT_TIMEOUT_S * 3):
        _stdout, stderr = await process.communicate()
    assert process.returncode == 128 + signal.SIGPIPE
    assert stderr == b""
    assert only_run(state_dir).status == "completed"
    assert_nothing_survives(state_dir)


@pytest.mark.parametrize("closed", ["stderr", "stdin and stderr"])
async def test_a_closed_stderr_is_taken_as_nothing_to_show_not_as_a_failure(
    tmp_path: Path, closed: str
) -> None:
    """`run ... 2>&-`: the person asked not to see stderr; the run goes on as with
    `2>/dev/null` (no file it opens takes descriptor 2 meanwhile)."""
    state_dir = tmp_path / "state"
    redirect = "2>&-" if closed == "stderr" else "<&- 2>&-"
    command = shlex.join(run_argv(state_dir, "--", "sh", "-c", "echo out; echo err >&2; exit 3"))
    process = await asyncio.create_subprocess_shell(
        f"{command} {redirect}", stdout=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(EXIT_TIMEOUT_S * 3):
        stdout, _ = await process.communicate()
    assert (process.returncode, stdout) == (3, b"out\n")
    assert only_run(state_dir).status == "failed"
    assert_nothing_survives(state_dir)


async def test_a_failed_command_exits_with_its_own_status_and_shows_its_stderr(
    tmp_path: Path,
) -> None:
    ended = await run(tmp_path / "state", "--", "sh", "-c", "echo out; echo oops >&2; exit 3")
    assert (ended.status, ended.stdout, ended.stderr) == (3, b"out\n", b"oops\n")


async def test_a_command_killed_by_a_signal_exits_128_plus_its_number(tmp_path: Path) -> None:
    ended = await run(tmp_path / "state", "--", "sh", "-c", "kill -USR1 $$")
    assert ended.status == 128 + signal.SIGUSR1


async def test_a_run_that_times_out_exits_124_and_leaves_not_even_a_grandchild(
    tmp_path: Path,
) -> None:
    ended = await run(
        tmp_path / "state", "--timeout-ms", "500", "--", "sh", "-c", "sleep 300 & sleep 301"
    )
    assert ended.status == 124
    assert ended.stderr.decode() == "subagent-host run: timed out after 500 ms (timeout)\n"
    assert only_run(tmp_path / "state").status == "timed-out"
    # `run` proved that no process of the run (the grandchild `sleep 300`) survived.


async def test_json_prints_the_final_snapshot_as_the_wire_has_it(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    ended = await run(
        tmp_path / "state", "--json", "--label", "greeting", "--cwd", str(work), "--", "pwd"
    )
    assert ended.status == 0 and ended.stderr == b""
    snapshot = json.loads(ended.stdout)
    assert nulls_in(snapshot) == []  # absent, never null
    assert_snapshot_table(snapshot)
    assert snapshot["status"] == "completed" and snapshot["label"] == "greeting"
    assert snapshot["runId"] == only_run(tmp_path / "state").run_id
    child = snapshot["children"][0]
    assert child["backend"] == "command" and child["exitCode"] == 0
    assert child["output"]["text"] == f"{work}\n"
    assert {"createdAt", "lastSeq", "admittedBy", "durationMs"} <= snapshot.keys()
    # As the wire has it: what schema/openrpc.json says `status` answers, no key more.
    checker = message_checker()
    checker.sent({"jsonrpc": "2.0", "id": 1, "method": "status", "params": {"runId": "x"}})
    checker.check({"jsonrpc": "2.0", "id": 1, "result": snapshot})


async def test_a_launch_the_server_refuses_is_one_line_and_exit_2(tmp_path: Path) -> None:
    ended = await run(tmp_path / "state", "--model", "big", "--", "echo", "hi")
    assert ended.status == 2 and ended.stdout == b""
    assert ended.stderr.decode() == (
        "subagent-host run: launch rejected: the command backend cannot honour model\n"
    )


async def test_a_command_that_cannot_start_exits_1_saying_why(tmp_path: Path) -> None:
    ended = await run(tmp_path / "state", "--", "./no-such-program")
    assert ended.status == 1
    assert ended.stderr.decode() == (
        "subagent-host run: cannot start './no-such-program': No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--timeout-ms", "soon", "--", "true"], "argument --timeout-ms: 'soon' is not a whole"),
        ([], "nothing to run: give a COMMAND after '--', a PROMPT, or --agent NAME"),
        (["--"], "nothing to run after '--': give a COMMAND"),
        (["hello", "--", "true"], "give a PROMPT or a COMMAND after '--', not both"),
        (["-i", "--json", "--", "cat"], "-i shows each turn as it comes: not with --json"),
        (["-i", "-q", "--", "cat"], "-i shows each turn as it comes: not with --json or --quiet"),
    ],
)
async def test_a_bad_command_line_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], says: str
) -> None:
    ended = await run(tmp_path / "state", *args)
    assert ended.status == 2 and ended.stdout == b""
    line = ended.stderr.decode()
    assert line.startswith(f"subagent-host run: {says}") and line.count("\n") == 1, line


@contextlib.asynccontextmanager
async def running_tree(state_dir: Path, started: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """`run` of a child with a grandchild, once both run; killed (by its pid) if the test
    leaves it running."""
    process = await asyncio.create_subprocess_exec(
        *run_argv(state_dir, "--", "sh", "-c", f"sleep 300 & touch {started}; wait"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await asyncio.to_thread(wait_for_file, started)
        yield process
    finally:
        if process.returncode is None:
            process.kill()  # by pid: the one process this test started
            await process.wait()


async def test_sigterm_stops_the_run_before_exiting_143(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    async with running_tree(state_dir, tmp_path / "started") as process:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            _stdout, stderr = await process.communicate()
    assert process.returncode == 128 + signal.SIGTERM
    assert stderr == b""
    stopped = only_run(state_dir)
    assert stopped.status == "cancelled" and stopped.reason == "subagent-host run got SIGTERM"
    assert_nothing_survives(state_dir)


async def test_a_server_that_dies_under_the_run_exits_75_and_the_next_one_cleans_up(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    async with running_tree(state_dir, tmp_path / "started") as process:
        (server,) = psutil.Process(process.pid).children()
        server.kill()  # by pid: the server `run` started for this test
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            _stdout, stderr = await process.communicate()
    assert process.returncode == 75, stderr.decode()
    assert stderr.decode().startswith(
        "subagent-host run: interrupted: the server ended before the run did"
    )
    # The next server on the state directory records the run as interrupted and ends
    # what it left (§13): here, through another `run`.
    assert (await run(state_dir, "--", "true")).status == 0
    with StateBrowser.open(state_dir) as browser:
        first = browser.runs(limit=2)[-1].run
    assert first.status == "interrupted" and (first.reason or "").startswith("server-died")


def test_ctrl_c_on_a_terminal_stops_the_run_and_its_whole_tree_and_exits_130(
    tmp_path: Path,
) -> None:
    state_dir, started = tmp_path / "state", tmp_path / "started"
    # The child's own child (`sleep 300`) is its grandchild: the stop must end it too.
    script = f"echo working; sleep 300 & touch {started}; wait"
    with terminal(run_argv(state_dir, "--", "sh", "-c", script), tmp_path / "stdout") as term:
        wait_for_file(started)
        # The live line shows on the terminal: the run's short id, its status, its output.
        term.wait_for(b"running")
        run_id = only_run(state_dir).run_id
        term.wait_for(run_id[:8].encode())
        term.write(b"\x03")  # Ctrl-C: the terminal sends SIGINT to its foreground group
        assert term.exit_status() == 130
    stopped = only_run(state_dir)
    assert stopped.status == "cancelled" and stopped.reason == "subagent-host run got SIGINT"
    assert stopped.children[0].stopped_by in ("sigterm", "sigkill")
    assert (tmp_path / "stdout").read_text() == "working\n"  # what it printed, still
    assert_nothing_survives(state_dir)


def test_the_live_line_shows_on_a_terminal_and_is_gone_once_the_run_has_ended(
    tmp_path: Path,
) -> None:
    state_dir, go = tmp_path / "state", tmp_path / "go"
    script = f"echo step one; while [ ! -e {go} ]; do sleep 0.05; done; echo done"
    with terminal(run_argv(state_dir, "--", "sh", "-c", script), tmp_path / "stdout") as term:
        term.wait_for(b"step one")  # the latest output line, on the live line
        term.wait_for(b"running")
        go.touch()
        assert term.exit_status() == 0
    assert (tmp_path / "stdout").read_text() == "step one\ndone\n"
    # Transient: the line is erased as the run ends (to the row's start, erase the row),
    # after its last drawing.
    drawn = term.seen.rfind(only_run(state_dir).run_id[:8].encode())
    assert drawn > 0 and b"\r\x1b[2K" in term.seen[drawn:], term.seen[-300:]
    # Its stdout is not a terminal: the output went there only, whole, at the end.
    assert b"done\r\n" not in term.seen
    assert_nothing_survives(state_dir)


@pytest.fixture
def mock() -> Iterator[MockLLM]:
    """A loopback mock LLM for this test (tests/mock_llm), closed after it."""
    with MockLLM() as server:
        yield server


GREETER: Final = f"""---
name: greeter
description: Says hello
model: mock/mock-model
---
{KEYWORD_ANSWER_NOW} and greet the user.
"""


@pytest.mark.skipif(not (AGENT_BIN / "pi").exists(), reason="pi is not installed")
@pytest.mark.parametrize(
    "args",
    [
        ["--backend", "pi", "--model", "mock/mock-model", f"{KEYWORD_ANSWER_NOW} say hello"],
        ["--agent", "greeter"],  # its instructions are the task; pi is the default backend
    ],
    ids=["prompt", "agent-alone"],
)
async def test_an_agent_run_prints_the_models_final_answer(
    tmp_path: Path, mock: MockLLM, args: list[str]
) -> None:
    agents = tmp_path / "xdg-config" / "subagent-host" / "agents"
    agents.mkdir(parents=True)
    (agents / "greeter.md").write_text(GREETER)
    env = {
        **pi_environment(tmp_path, mock.openai_base_url),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
    }
    ended = await run(tmp_path / "state", *args, env=env, cwd=tmp_path)
    assert ended.status == 0, ended.stderr.decode()
    child = only_run(tmp_path / "state").children[0]
    assert child.backend == "pi" and child.output.text.startswith(FINAL_TEXT_PREFIX)
    assert ended.stdout.decode() == child.output.text and ended.stderr == b""
    assert "scenario=answer-now" in child.output.text, child.output.text


@pytest.mark.skipif(not (AGENT_BIN / "pi").exists(), reason="pi is not installed")
async def test_an_agent_run_where_consent_is_required_needs_egress_consent(
    tmp_path: Path, mock: MockLLM
) -> None:
    consent = consent_required(tmp_path)
    env = pi_environment(tmp_path, mock.openai_base_url)
    args = (*consent, "--backend", "pi", "--model", "mock/mock-model")
    refused = await run(tmp_path / "state", *args, f"{KEYWORD_ANSWER_NOW} hi", env=env)
    assert refused.status == 2 and refused.stdout == b""
    assert "egressConsent" in refused.stderr.decode()
    assert mock.requests == []  # nothing left the machine
    ended = await run(
        tmp_path / "state", *args, "--egress-consent", f"{KEYWORD_ANSWER_NOW} hi", env=env
    )
    assert ended.status == 0, ended.stderr.decode()
    assert only_run(tmp_path / "state").egress_consent is True


# --- a real pseudo-terminal ----------------------------------------------------------------


def wait_for_file(path: Path) -> None:
    """Until a child has created `path` (the child says so; nothing else would tell us)."""
    deadline = EXIT_TIMEOUT_S / POLL_S
    for _ in range(int(deadline)):
        if path.exists():
            return
        threading.Event().wait(POLL_S)
    raise AssertionError(f"{path} never appeared")


class Terminal:
    """A process on the slave side of a pseudo-terminal (its controlling terminal, its
    stdin and stderr; stdout to a file), and everything it wrote there."""

    def __init__(self, pid: int, master: int) -> None:
        self.pid = pid
        self.master = master
        self.seen = b""
        self._changed = threading.Condition()
        self._status: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:  # EIO: the slave side has closed
                data = b""
            with self._changed:
                self.seen += data
                if not data:
                    self._status = -1
                self._changed.notify_all()
            if not data:
                return

    def wait_for(self, text: bytes, after: int = 0) -> int:
        """Until `text` was written (after the first `after` bytes); where it ends."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: text in self.seen[after:] or self._status is not None, EXIT_TIMEOUT_S
            )
            assert found and text in self.seen[after:], (text, self.seen[-2000:])
            return self.seen.index(text, after) + len(text)

    def write(self, data: bytes) -> None:
        os.write(self.master, data)

    def exit_status(self) -> int:
        with self._changed:
            assert self._changed.wait_for(lambda: self._status is not None, EXIT_TIMEOUT_S * 3)
        self._reader.join(EXIT_TIMEOUT_S)
        _pid, status = os.waitpid(self.pid, 0)
        self.pid = 0
        return os.waitstatus_to_exitcode(status)


class terminal:  # noqa: N801 - used as a context manager, like open()
    """`argv` on a pseudo-terminal; its stdout to the file `stdout`, or there too (None)."""

    def __init__(self, argv: list[str], stdout: Path | None) -> None:
        self._argv = argv
        self._stdout = stdout
        self._term: Terminal | None = None

    def __enter__(self) -> Terminal:
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
        env.pop("NO_COLOR", None)
        pid, master = pty.fork()
        if pid == 0:  # the child: the terminal is its controlling one, in the foreground
            try:
                if self._stdout is not None:
                    out = os.open(self._stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    os.dup2(out, 1)
                os.execve(self._argv[0], self._argv, env)
            finally:
                os._exit(127)
        self._term = Terminal(pid, master)
        return self._term

    def __exit__(self, *exc_info: object) -> None:
        term = self._term
        assert term is not None
        if term.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(term.pid, signal.SIGKILL)  # by pid: the one process this test started
            os.waitpid(term.pid, 0)
        os.close(term.master)
