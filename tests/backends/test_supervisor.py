"""The supervisor against real process trees: start, drain, exit status, and the stop sequence.

Every test runs once per process tracking mode (cgroup where this host allows it,
subreaper, marker): what a mode cannot guarantee is skipped with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest

from subagent_host.backends import cgroups
from subagent_host.backends.cgroups import Group
from subagent_host.backends.exits import ProcessExit, StoppedBy
from subagent_host.backends.lifeline import GuardianLog
from subagent_host.backends.pipes import OUTPUT_PIPE_BYTES
from subagent_host.backends.supervisor import (
    LEFTOVER_GRACE_S,
    RUN_MARKER,
    LaunchSpec,
    StopStep,
    Supervisor,
    SweepHandedOver,
)
from subagent_host.backends.tracking import TrackingMode, TrackingUnavailable, choose
from tests.backends.conftest import assert_gone, poll_until, processes_with_marker

FAKES = Path(__file__).resolve().parent.parent / "fakes"
WAIT_S = 30.0  # generous: tests assert behaviour, never speed


class Collect:
    """An output sink that keeps everything and can wait for a line."""

    def __init__(self) -> None:
        self.stdout = bytearray()
        self.stderr = bytearray()
        self._grew = asyncio.Event()

    def on_stdout(self, data: bytes) -> None:
        self.stdout += data
        self._grew.set()

    def on_stderr(self, data: bytes) -> None:
        self.stderr += data
        self._grew.set()

    async def line_starting(self, prefix: bytes) -> bytes:
        async with asyncio.timeout(WAIT_S):
            while True:
                for line in bytes(self.stdout).splitlines():
                    if line.startswith(prefix):
                        return line
                self._grew.clear()
                await self._grew.wait()


@contextlib.asynccontextmanager
async def fifo_reader(path: Path) -> AsyncIterator[asyncio.Future[bytes]]:
    """A future of the first bytes written to the FIFO at `path` (opened for reading and
    writing, so that it never reads an end before its writer comes)."""
    loop = asyncio.get_running_loop()
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    said: asyncio.Future[bytes] = loop.create_future()

    def read() -> None:
        if not said.done():
            said.set_result(os.read(fd, 4096))

    loop.add_reader(fd, read)
    try:
        yield said
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def spec(marker: str, *argv: str, stdin: bytes | None = None) -> LaunchSpec:
    env = {"PATH": os.environ["PATH"], RUN_MARKER: marker}
    return LaunchSpec(argv=argv, cwd=str(FAKES), env=env, stdin=stdin)


def fake(name: str, *args: str) -> tuple[str, ...]:
    return (sys.executable, str(FAKES / name), *args)


@pytest.fixture(params=[mode.value for mode in TrackingMode])
async def supervisor(request: pytest.FixtureRequest) -> AsyncIterator[Supervisor]:
    try:
        tracking = choose(request.param)
    except TrackingUnavailable as exc:
        pytest.skip(str(exc))
    supervisor = Supervisor(tracking)
    yield supervisor
    supervisor.close()


def needs_subreaper(supervisor: Supervisor) -> None:
    if not supervisor.is_subreaper:
        pytest.skip("marker tracking: orphans are reparented to init, not to us")


async def test_echo_output_and_exit_status(supervisor: Supervisor, marker: str) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, "echo", "hello"), sink)
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(0, None)
    assert sink.stdout == b"hello\n"


async def test_non_zero_exit_and_stderr_are_reported(supervisor: Supervisor, marker: str) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, "sh", "-c", "echo oops >&2; exit 3"), sink)
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(3, None)
    assert sink.stderr == b"oops\n"


async def test_stdin_is_fed_then_closed(supervisor: Supervisor, marker: str) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, "cat", stdin=b"prompt text"), sink)
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert sink.stdout == b"prompt text"


async def test_stdin_larger_than_the_pipe_is_fed_whole(supervisor: Supervisor, marker: str) -> None:
    # 4 MiB does not fit a pipe: the rest is written as the child reads.
    prompt = bytes(range(256)) * (16 * 1024)
    sink = Collect()
    child = await supervisor.start(spec(marker, "cat", stdin=prompt), sink)
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(0, None)
    assert sink.stdout == prompt


async def test_a_child_that_never_reads_stdin_still_ends(
    supervisor: Supervisor, marker: str
) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, "true", stdin=b"x" * (4 * 1024 * 1024)), sink)
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(0, None)


async def test_the_exit_carries_the_childs_own_usage(supervisor: Supervisor, marker: str) -> None:
    burn = "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass"
    child = await supervisor.start(spec(marker, sys.executable, "-c", burn), Collect())
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert child.usage is not None
    assert child.usage.cpu_seconds >= 0.2
    # Never wait4's peak: the fork inherits the server's own (tens of MB).
    assert child.usage.rss_bytes == 0 or supervisor.tracking.hierarchy is not None


async def test_stdin_is_closed_even_without_input(supervisor: Supervisor, marker: str) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, "cat"), sink)  # would wait forever on open stdin
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(0, None)


async def test_only_the_given_environment_reaches_the_child(
    supervisor: Supervisor, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVER_SECRET", "hunter2")
    sink = Collect()
    child = await supervisor.start(spec(marker, "env"), sink)
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert b"SERVER_SECRET" not in sink.stdout
    assert f"{RUN_MARKER}={marker}".encode() in sink.stdout


async def test_the_child_gets_exactly_the_given_environment_in_every_mode(
    supervisor: Supervisor, marker: str
) -> None:
    """No variable of the cgroup trampoline (a shell exports PWD) reaches the program."""
    for extra in ({}, {"PWD": "/somewhere/else"}):
        sink = Collect()
        given = {**spec(marker).env, **extra}
        script = "import json, os; print(json.dumps(dict(os.environ)))"
        launch = LaunchSpec(argv=(sys.executable, "-c", script), cwd=str(FAKES), env=given)
        child = await supervisor.start(launch, sink)
        await asyncio.wait_for(supervisor.wait(child), WAIT_S)
        seen = json.loads(bytes(sink.stdout))
        seen.pop("LC_CTYPE", None)  # Python may coerce a C locale to UTF-8 itself
        assert seen == given


async def test_a_child_runs_in_its_own_session(supervisor: Supervisor, marker: str) -> None:
    sink = Collect()
    report_sid = "import os; print(os.getsid(0))"
    child = await supervisor.start(spec(marker, sys.executable, "-c", report_sid), sink)
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert int(sink.stdout) == child.pid != os.getsid(0)


async def test_stop_ends_a_20_process_tree_with_sigterm(
    supervisor: Supervisor, marker: str
) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, *fake("tree.py", "20")), sink)
    await sink.line_starting(b"ready")
    assert len(processes_with_marker(marker)) == 20
    outcome = await asyncio.wait_for(supervisor.stop(child, grace_s=10.0), WAIT_S)
    assert outcome.step is StopStep.SIGTERM
    status = await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert status == ProcessExit(None, 15)
    assert processes_with_marker(marker) == []


async def test_a_tree_ignoring_sigterm_is_killed_after_the_grace_not_before(
    supervisor: Supervisor, marker: str
) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, *fake("tree.py", "5", "--ignore-term")), sink)
    await sink.line_starting(b"ready")
    started = time.monotonic()
    outcome = await asyncio.wait_for(supervisor.stop(child, grace_s=1.0), WAIT_S)
    assert time.monotonic() - started >= 1.0  # SIGKILL only once the grace is over
    assert outcome.step is StopStep.SIGKILL
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(None, 9)
    assert processes_with_marker(marker) == []


async def test_a_child_that_goes_on_sigterm_was_stopped_by_sigterm(
    supervisor: Supervisor, marker: str
) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, *fake("tree.py", "1")), sink)
    await sink.line_starting(b"ready")
    await asyncio.wait_for(supervisor.stop(child, grace_s=10.0), WAIT_S)
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(None, 15)
    assert child.stopped_by is StoppedBy.SIGTERM


async def test_a_child_ignoring_sigterm_was_stopped_by_sigkill_once_a_short_grace_was_over(
    supervisor: Supervisor, marker: str
) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, *fake("tree.py", "1", "--ignore-term")), sink)
    await sink.line_starting(b"ready")
    await asyncio.wait_for(supervisor.stop(child, grace_s=0.2), WAIT_S)
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(None, 9)
    assert child.stopped_by is StoppedBy.SIGKILL


async def test_a_child_that_exits_on_its_own_was_stopped_by_its_exit(
    supervisor: Supervisor, marker: str
) -> None:
    child = await supervisor.start(spec(marker, "sh", "-c", "exit 3"), Collect())
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(3, None)
    await supervisor.stop(child, grace_s=1.0)  # a stop that comes too late changes nothing
    assert child.stopped_by is StoppedBy.EXIT


async def test_a_child_that_exited_is_exit_even_when_its_leftover_needed_sigkill(
    supervisor: Supervisor, marker: str
) -> None:
    """Only the child's own ending counts: its leftover is ended by the sweep, with SIGKILL."""
    sink = Collect()
    # The background sleep inherits the ignored SIGTERM.
    script = "trap '' TERM; sleep 1000 </dev/null >/dev/null 2>&1 & echo $!"
    started = time.monotonic()
    child = await supervisor.start(spec(marker, "sh", "-c", script), sink)
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(0, None)
    assert time.monotonic() - started >= LEFTOVER_GRACE_S  # SIGTERM was not enough for it
    await assert_gone([int(sink.stdout)])
    assert (child.leftovers_ended, child.stopped_by) == (1, StoppedBy.EXIT)


async def test_a_grandchild_that_called_setsid_is_ended_too(
    supervisor: Supervisor, marker: str
) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, *fake("escapes.py", "setsid")), sink)
    escaped = int((await sink.line_starting(b"ready")).split()[1])
    assert os.getpgid(escaped) != child.pgid  # outside the group killpg reaches
    await asyncio.wait_for(supervisor.stop(child, grace_s=10.0), WAIT_S)
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert processes_with_marker(marker) == []


async def test_a_double_forked_daemon_is_adopted_found_by_its_marker_and_ended(
    supervisor: Supervisor, marker: str
) -> None:
    needs_subreaper(supervisor)
    sink = Collect()
    child = await supervisor.start(spec(marker, *fake("escapes.py", "daemon")), sink)
    daemon = int((await sink.line_starting(b"ready")).split()[1])
    assert psutil.Process(daemon).ppid() == os.getpid()  # reparented to us, not PID 1
    await asyncio.wait_for(supervisor.stop(child, grace_s=10.0), WAIT_S)
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert processes_with_marker(marker) == []
    assert not psutil.pid_exists(daemon)  # and reaped, not left a zombie


async def test_a_grandchild_holding_stdout_does_not_hang_the_run(
    supervisor: Supervisor, marker: str
) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, "sh", "-c", "sleep 300 & echo done"), sink)
    status = await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert status == ProcessExit(0, None)
    assert sink.stdout == b"done\n"
    assert processes_with_marker(marker) == []


async def test_output_held_back_is_read_whole_once_the_child_has_exited(
    supervisor: Supervisor, marker: str
) -> None:
    # Less than any pipe holds: the child writes it all and exits while nobody reads.
    size = 60_000
    sink = Collect()
    child = await supervisor.start(spec(marker, "head", "-c", str(size), "/dev/zero"), sink)
    child.hold_output()  # a slow client: its stdout is not read
    # Its tree is gone: its end waits for no client, and what it wrote is all there.
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(0, None)
    assert sink.stdout == bytes(size)


async def test_a_child_held_back_on_a_full_pipe_ends_when_stopped_and_its_pipe_is_read(
    supervisor: Supervisor, marker: str, tmp_path: Path
) -> None:
    # It says `ready` through a FIFO of the test's (its stdout and stderr are both held
    # back) once its first output is in the pipe.
    ready = tmp_path / "ready"
    os.mkfifo(ready)
    flood = "import sys\nsys.stdout.write('y\\n'); sys.stdout.flush()\n"
    flood += f"open({str(ready)!r}, 'w').write('ready')\n"
    flood += "while True: sys.stdout.write('y\\n' * 4096)"
    async with fifo_reader(ready) as said:
        sink = Collect()
        child = await supervisor.start(spec(marker, sys.executable, "-c", flood), sink)
        child.hold_output()  # it fills its pipe, then blocks on write
        await asyncio.wait_for(said, WAIT_S)
    await supervisor.stop(child, grace_s=1.0)
    status = await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert status == ProcessExit(None, signal.SIGTERM)
    # What the pipe held, no more: it never ran on.
    assert 0 < len(sink.stdout) <= OUTPUT_PIPE_BYTES
    assert sink.stdout == (b"y\n" * len(sink.stdout))[: len(sink.stdout)]
    assert processes_with_marker(marker) == []


async def test_stopping_an_exited_child_finds_nothing_left(
    supervisor: Supervisor, marker: str
) -> None:
    child = await supervisor.start(spec(marker, "true"), Collect())
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    outcome = await supervisor.stop(child, grace_s=1.0)
    assert outcome.step is StopStep.NOTHING_LEFT


async def test_a_missing_program_raises_before_anything_runs(
    supervisor: Supervisor, marker: str
) -> None:
    with pytest.raises(FileNotFoundError):
        await supervisor.start(spec(marker, "/nonexistent/program"), Collect())


async def test_an_adopted_orphan_that_exits_on_its_own_is_reaped(
    supervisor: Supervisor, marker: str
) -> None:
    needs_subreaper(supervisor)
    supervisor.reap_on_sigchld()
    sink = Collect()
    child = await supervisor.start(spec(marker, *fake("escapes.py", "brief")), sink)
    orphan = int((await sink.line_starting(b"ready")).split()[1])
    await asyncio.wait_for(supervisor.reaped.wait(), WAIT_S)
    assert not psutil.pid_exists(orphan)  # reaped, not a zombie of ours
    await supervisor.stop(child, grace_s=5.0)
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)


async def test_orphan_sweeps_never_steal_the_exit_status_of_a_fresh_child(
    supervisor: Supervisor, marker: str
) -> None:
    # A sweep that ran between fork and registration took a quick child's status,
    # and asyncio then reported 255. Many quick children, sweeping all along:
    supervisor.reap_on_sigchld()
    for _ in range(300):
        child = await supervisor.start(spec(marker, "true"), Collect())
        assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(0, None)


# --- nothing left behind, however the child ends ----------------------------------------


async def test_a_setsid_child_left_by_a_child_that_exited_is_ended_before_wait_returns(
    supervisor: Supervisor, marker: str
) -> None:
    sink = Collect()
    script = "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!"
    child = await supervisor.start(spec(marker, "sh", "-c", script), sink)
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(0, None)
    await assert_gone([int(sink.stdout)])
    assert child.leftovers_ended == 1


async def test_a_double_forked_daemon_left_by_a_child_that_exited_is_ended_before_wait_returns(
    supervisor: Supervisor, marker: str
) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, *fake("escapes.py", "detach")), sink)
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(0, None)
    daemon = int(sink.stdout.split()[1])
    await assert_gone([daemon])
    assert child.leftovers_ended == 1


async def test_an_escaper_that_cleared_its_environment_is_ended_by_stop(
    supervisor: Supervisor, marker: str
) -> None:
    if supervisor.mode is TrackingMode.MARKER:
        pytest.skip("marker tracking cannot find an orphan without the marker (protocol.md §8.3)")
    sink = Collect()
    script = "(env -i setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!); sleep 1000"
    child = await supervisor.start(spec(marker, "sh", "-c", script), sink)
    escaped = int(await sink.line_starting(b""))
    assert await poll_until(lambda: psutil.Process(escaped).name() == "sleep")  # exec'd: env -i
    assert RUN_MARKER not in psutil.Process(escaped).environ()
    await asyncio.wait_for(supervisor.stop(child, grace_s=5.0), WAIT_S)
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(None, 15)
    await assert_gone([escaped])
    assert child.leftovers_ended >= 2  # the inner sleep and the escaper


async def test_a_setsid_grandchild_holding_stdout_is_ended_once_the_child_exits(
    supervisor: Supervisor, marker: str
) -> None:
    sink = Collect()
    script = "setsid sleep 1000 & echo $!"  # the grandchild keeps the stdout pipe
    child = await supervisor.start(spec(marker, "sh", "-c", script), sink)
    assert await asyncio.wait_for(supervisor.wait(child), WAIT_S) == ProcessExit(0, None)
    await assert_gone([int(sink.stdout)])


async def test_a_child_that_leaves_nothing_waits_for_no_grace(
    supervisor: Supervisor, marker: str
) -> None:
    started = time.monotonic()
    child = await supervisor.start(spec(marker, "true"), Collect())
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert time.monotonic() - started < LEFTOVER_GRACE_S
    assert child.leftovers_ended == 0


async def test_a_cgroup_child_is_in_its_own_cgroup_from_its_first_instruction(
    supervisor: Supervisor, marker: str
) -> None:
    if supervisor.mode is not TrackingMode.CGROUP:
        pytest.skip("cgroup tracking only")
    sink = Collect()
    child = await supervisor.start(spec(marker, "cat", "/proc/self/cgroup"), sink)
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert child.group is not None
    relative = child.group.path.relative_to(supervisor.tracking.hierarchy.mount)  # type: ignore[union-attr]
    assert f"0::/{relative}\n".encode() in sink.stdout
    assert not child.group.path.exists()  # removed once its child ended


async def _orphan_in(group: Group, *, ignores_term: bool = False) -> int:
    """A process moved into `group`, its environment cleared, as an orphan (its shell
    exits at once), so that no asyncio watcher of ours waits for it: its pid."""
    trap = "trap '' TERM; " if ignores_term else ""  # ignored through exec
    script = (
        f"({trap}echo 0 > {group.path}/cgroup.procs; exec env -i sleep 1000) >/dev/null & echo $!"
    )
    shell = await asyncio.create_subprocess_exec("sh", "-c", script, stdout=asyncio.subprocess.PIPE)
    orphan = int((await asyncio.wait_for(shell.communicate(), WAIT_S))[0])
    assert await poll_until(lambda: orphan in group.pids())  # the subshell moves itself in
    return orphan


@pytest.mark.parametrize("locked", [True, False], ids=["locked", "older-unlocked"])
async def test_a_gone_servers_cgroups_are_swept_with_their_processes(
    supervisor: Supervisor, marker: str, locked: bool
) -> None:
    if supervisor.mode is not TrackingMode.CGROUP:
        pytest.skip("cgroup tracking only")
    hierarchy = supervisor.tracking.hierarchy
    assert hierarchy is not None
    # A server that is gone: a pid that exists but started at another time, and (made
    # here, not through `instance`) nobody holds the lock; or an older server's name.
    name = cgroups.instance_name(os.getpid(), 1) if locked else f"i{os.getpid()}-1"
    dead = Group(hierarchy.root / name)
    dead.path.mkdir()
    group = dead.child("run-0-1")
    # One in the child's cgroup, one in a cgroup the child made below its own.
    escapers = [await _orphan_in(group), await _orphan_in(group.child("made-by-the-child"))]
    # At least ours: another gone server's cgroups (a SIGKILLed test server) count too.
    assert await supervisor.sweep_gone_instances(grace_s=1.0) >= 2
    await assert_gone(escapers)
    assert not dead.path.exists()


async def test_a_sweep_in_its_grace_is_left_to_the_guardian_when_the_server_leaves(
    supervisor: Supervisor, marker: str
) -> None:
    if supervisor.mode is not TrackingMode.CGROUP:
        pytest.skip("cgroup tracking only")
    hierarchy = supervisor.tracking.hierarchy
    assert hierarchy is not None
    supervisor.guard(GuardianLog(fd=None))
    dead = Group(hierarchy.root / cgroups.instance_name(os.getpid(), 1))
    dead.path.mkdir()
    stubborn = await _orphan_in(dead.child("run-0-1"), ignores_term=True)
    assert supervisor.hand_over_sweeps()  # the server is leaving
    guardian = supervisor.guardian
    assert guardian is not None and guardian.pid is not None
    # The whole grace (far longer than this test waits) is the guardian's now.
    with pytest.raises(SweepHandedOver) as handed:
        await asyncio.wait_for(supervisor.sweep_gone_instances(grace_s=600.0), WAIT_S)
    assert handed.value.processes >= 1 and handed.value.grace_left_s > 500
    await asyncio.wait_for(supervisor.aclose(), WAIT_S)  # its bye; the guardian goes on
    assert guardian.pid is not None and psutil.Process(guardian.pid).is_running()
    assert psutil.Process(stubborn).status() != psutil.STATUS_ZOMBIE  # SIGTERM ignored
    assert dead.path.exists()
    os.kill(stubborn, signal.SIGKILL)  # by pid: the orphan this test made; no need to wait
    assert await poll_until(lambda: guardian.pid is None, WAIT_S)  # exited, reaped here
    supervisor.reap_exited()  # a subreaper's orphan: ours to reap
    await assert_gone([stubborn])
    assert not dead.path.exists()  # the guardian removed it


async def test_strays_in_their_grace_are_left_to_the_guardian_when_the_server_leaves(
    supervisor: Supervisor, marker: str
) -> None:
    env = {"PATH": os.environ["PATH"], RUN_MARKER: marker}
    stray = await asyncio.create_subprocess_exec(
        "sh", "-c", "trap '' TERM; exec sleep 1000", env=env, start_new_session=True
    )
    assert not supervisor.hand_over_sweeps()  # no guardian: the sweep is waited for
    supervisor.guard(GuardianLog(fd=None))
    assert supervisor.hand_over_sweeps()
    guardian = supervisor.guardian
    assert guardian is not None
    with pytest.raises(SweepHandedOver) as handed:
        await asyncio.wait_for(supervisor.end_strays(frozenset({marker}), [], 600.0), WAIT_S)
    assert handed.value.processes == 1
    await asyncio.wait_for(supervisor.aclose(), WAIT_S)
    assert guardian.pid is not None and stray.returncode is None  # both in the grace
    stray.kill()  # by pid: the process this test started
    assert await asyncio.wait_for(stray.wait(), WAIT_S) == -signal.SIGKILL
    assert await poll_until(lambda: guardian.pid is None, WAIT_S)


async def test_a_live_servers_cgroups_are_not_swept_even_where_its_pid_looks_gone(
    supervisor: Supervisor, marker: str
) -> None:
    """What a server in another PID namespace sees: a pid and start time nobody has here.
    The instance's lock, held by its live server, is what tells it is alive."""
    if supervisor.mode is not TrackingMode.CGROUP:
        pytest.skip("cgroup tracking only")
    hierarchy = supervisor.tracking.hierarchy
    assert hierarchy is not None
    live = hierarchy.instance(os.getpid(), 2)  # takes and holds its lock, as a server does
    group = live.child("run-0-1")
    member = await _orphan_in(group)
    try:
        await supervisor.sweep_gone_instances(grace_s=1.0)
        assert psutil.Process(member).status() != psutil.STATUS_ZOMBIE
        assert group.pids() == [member]
    finally:
        group.kill()
        assert await poll_until(lambda: not group.pids())
        supervisor.reap_exited()  # a subreaper's orphan: ours to reap
        await assert_gone([member])
        assert live.remove()


@pytest.mark.parametrize("stopped", [False, True], ids=["exits", "stopped"])
async def test_a_process_a_child_moved_to_a_cgroup_of_its_own_making_ends_with_the_child(
    supervisor: Supervisor, marker: str, stopped: bool
) -> None:
    """The child makes a cgroup below its own and moves a process there (in a session of
    its own, its environment cleared), then exits or is stopped: the run's end still
    ends that process, and removes both cgroups."""
    if supervisor.mode is not TrackingMode.CGROUP:
        pytest.skip("cgroup tracking only: only a cgroup's child can make a cgroup below it")
    sink = Collect()
    script = ESCAPE + ("; exec sleep 1000" if stopped else "")
    child = await supervisor.start(spec(marker, "sh", "-c", script, mount_of(supervisor)), sink)
    escaper = int(await sink.line_starting(b""))
    if stopped:
        report = await asyncio.wait_for(supervisor.stop(child, grace_s=5.0), WAIT_S)
        assert report.step is StopStep.SIGTERM
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    await assert_gone([escaper])
    assert child.group is not None
    assert not child.group.path.exists()


# $0: the cgroup2 mount. A cgroup below the child's own, and a process in it that
# cleared its environment (no marker): only the cgroup tree can still find it.
ESCAPE = (
    'cg="$0$(sed -n "s/^0:://p" /proc/self/cgroup)"; mkdir "$cg/made-by-the-child" && '
    '(echo 0 > "$cg/made-by-the-child/cgroup.procs"; exec setsid env -i sleep 1000) '
    "</dev/null >/dev/null 2>&1 & echo $!"
)


def mount_of(supervisor: Supervisor) -> str:
    hierarchy = supervisor.tracking.hierarchy
    assert hierarchy is not None
    return str(hierarchy.mount)


async def test_an_exit_listener_is_told_in_the_step_the_child_is_reaped(
    supervisor: Supervisor, marker: str
) -> None:
    told: list[str] = []
    child = await supervisor.start(spec(marker, "true"), Collect())
    # A done callback of `exited` runs a turn of the loop after the reap: the listener first.
    child.exited.add_done_callback(lambda _: told.append("exited's callback"))
    remove = child.on_exit(lambda: told.append(f"listener, returncode {child.returncode}"))
    removed = child.on_exit(lambda: told.append("removed listener"))
    removed()
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert told == ["listener, returncode 0", "exited's callback"]
    remove()  # after the exit: nothing left to remove, and no error
    late: list[int | None] = []
    child.on_exit(lambda: late.append(child.returncode))
    assert late == [0]  # registered after the exit: told at once


async def test_ending_what_a_running_child_started_since_a_moment_spares_the_older(
    supervisor: Supervisor, marker: str, tmp_path: Path
) -> None:
    """A turn's leftovers are what its tree started since the turn began: a launcher's
    own processes (codex's binary under its node script) are older, and run on."""
    go = tmp_path / "go"
    os.mkfifo(go)
    script = 'sleep 1000 & echo old $!; read x < "$0"; sleep 1000 & echo new $!; wait'
    sink = Collect()
    child = await supervisor.start(spec(marker, "sh", "-c", script, str(go)), sink)
    old = int((await sink.line_starting(b"old ")).split()[1])
    # The moment is after the older process's start (its tick counted whole).
    assert await poll_until(lambda: cgroups.ticks_now() > (cgroups.start_ticks(old) or 0))
    since = cgroups.ticks_now()
    await asyncio.to_thread(go.write_text, "go\n")
    new = int((await sink.line_starting(b"new ")).split()[1])
    assert await supervisor.end_descendants(child, 2.0, since) == 1
    await assert_gone([new])
    assert psutil.Process(old).is_running() and child.leftovers_ended == 1
    await supervisor.stop(child, 2.0)
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    await assert_gone([old])
