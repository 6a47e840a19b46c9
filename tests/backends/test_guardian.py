"""The guardian program (backends/guardian.py) on its own: told of real processes over a
real lifeline, it ends them once its server is gone without a `bye`, and only them.

A stand-in server (a `sleep`, or a shell with a child of its own) is the process
the guardian watches; the test holds the lifeline's write end and starts the
run processes (each in a session of its own, as the supervisor does), and reaps
them, so how each one ended is known exactly. "The server dies": the test
SIGKILLs the stand-in and closes the write end.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import json
import os
import re
import signal
import sys
import termios
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from subagent_host.backends import cgroups, lifeline
from subagent_host.backends.supervisor import RUN_MARKER
from tests.backends.conftest import poll_until

WAIT_S: Final = 30.0  # generous: the guardian's grace is one second, a loaded machine slower
# A shell that ignores SIGTERM, as does its sleep; then the shell becomes a sleep too (an
# ignored signal stays ignored across exec) that never waits for its child: only a
# SIGKILL ends it, whichever of the two the guardian's SIGKILLs reach first (a shell
# that waited would exit 0 when its child's came first, on a busy machine).
IGNORES_TERM: Final = "trap '' TERM; sleep 1000 & echo $!; exec sleep 1000"
# One process that ignores SIGTERM (through exec), once it says so.
STUBBORN: Final = "trap '' TERM; echo ready; exec sleep 1000"
# A stand-in server with a child of no run (a version probe, say): it prints its pid.
WITH_A_CHILD: Final = "sleep 1000 >/dev/null & echo $!; exec sleep 1000"


class Lifeline:
    """A running guardian, the lifeline's write end and the stand-in server."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        write_end: int,
        server: asyncio.subprocess.Process,
        log: Path | None = None,
    ) -> None:
        self.process = process
        self.server = server
        self.log = log
        """The file the guardian logs to; None: a pipe read here."""
        self._write_end: int | None = write_end

    def tell(self, *messages: dict[str, Any]) -> None:
        assert self._write_end is not None
        for message in messages:
            os.write(self._write_end, json.dumps(message).encode() + b"\n")

    async def taken(self) -> None:
        """Wait until the guardian has taken every line told so far: a no-op line after
        them is read (the pipe is empty) only once those before it were taken."""
        self.tell({"ended": 0})
        assert self._write_end is not None
        fd = self._write_end
        assert await poll_until(lambda: _unread(fd) == 0, WAIT_S)

    def close(self) -> None:
        if self._write_end is not None:
            os.close(self._write_end)
            self._write_end = None

    async def server_dies(self) -> tuple[int, str]:
        """SIGKILL the stand-in server (its lifeline ends with it); the guardian's exit
        status and what it logged."""
        with contextlib.suppress(ProcessLookupError):
            self.server.kill()  # by pid: the stand-in this test started
        await asyncio.wait_for(self.server.wait(), WAIT_S)
        self.close()
        _, stderr = await asyncio.wait_for(self.process.communicate(), WAIT_S)
        assert self.process.returncode is not None
        logged = self.log.read_text() if self.log is not None else stderr.decode()
        return self.process.returncode, logged


@contextlib.asynccontextmanager
async def guarding(*server: str, log: Path | None = None) -> AsyncIterator[Lifeline]:
    """A guardian watching the stand-in server `server` (an argv), logging to a pipe read
    here, or to the file `log` (as a server's `--log-file`)."""
    stand_in = await asyncio.create_subprocess_exec(
        *server, stdout=asyncio.subprocess.PIPE, start_new_session=True
    )
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-S",
        lifeline.PROGRAM,
        str(read_end),
        str(stand_in.pid),
        str(cgroups.start_ticks(stand_in.pid)),
        "text",
        pass_fds=(read_end,),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=log.open("ab") if log is not None else asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    os.close(read_end)
    line = Lifeline(process, write_end, stand_in, log)
    try:
        yield line
    finally:
        if process.returncode is None:
            await line.server_dies()


@pytest.fixture
async def guardian() -> AsyncIterator[Lifeline]:
    async with guarding("sleep", "1000") as line:
        yield line


async def start(marker: str, *argv: str) -> asyncio.subprocess.Process:
    """A child as the supervisor starts one: its own session, the run marker in its env."""
    return await asyncio.create_subprocess_exec(
        *argv,
        env={"PATH": os.environ["PATH"], RUN_MARKER: marker},
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )


async def stubborn(marker: str, *prefix: str) -> asyncio.subprocess.Process:
    """A child that ignores SIGTERM (started through `prefix`), once it ignores it."""
    process = await start(marker, *prefix, "sh", "-c", STUBBORN)
    assert process.stdout is not None
    assert await asyncio.wait_for(process.stdout.readline(), WAIT_S) == b"ready\n"
    return process


async def ended_by(process: asyncio.subprocess.Process) -> int:
    """How the process ended: minus the signal that ended it."""
    return await asyncio.wait_for(process.wait(), WAIT_S)


async def test_the_lifelines_end_without_bye_ends_every_told_tree_term_first_then_kill(
    guardian: Lifeline, marker: str
) -> None:
    honours = await start(marker, "sleep", "1000")
    ignores = await start(marker, "sh", "-c", IGNORES_TERM)
    assert ignores.stdout is not None
    grandchild = int(await asyncio.wait_for(ignores.stdout.readline(), WAIT_S))
    guardian.tell(
        {"child": 1, "pid": honours.pid, "marker": marker},
        {"child": 2, "pid": ignores.pid, "marker": marker},
    )
    code, logged = await guardian.server_dies()
    assert code == 0
    assert await ended_by(honours) == -signal.SIGTERM
    assert await ended_by(ignores) == -signal.SIGKILL
    # Its grandchild ignored SIGTERM too; the `marker` fixture proves it is gone.
    assert await poll_until(lambda: not _alive(grandchild), WAIT_S)
    assert "SIGTERM sent to 3 processes of its 1 run; SIGKILL to the 2 left" in logged, logged


async def test_a_bye_leaves_every_process_alone(guardian: Lifeline, marker: str) -> None:
    child = await start(marker, "sleep", "1000")
    guardian.tell({"child": 1, "pid": child.pid, "marker": marker}, {"bye": True})
    assert await guardian.server_dies() == (0, "")
    assert child.returncode is None and _alive(child.pid)
    child.kill()  # by pid: the process this test started
    assert await ended_by(child) == -signal.SIGKILL


async def test_an_ended_child_is_forgotten(guardian: Lifeline, marker: str) -> None:
    child = await start(marker, "sleep", "1000")
    guardian.tell({"child": 1, "pid": child.pid, "marker": marker}, {"ended": 1})
    assert await guardian.server_dies() == (0, "")
    assert _alive(child.pid)
    child.kill()
    await ended_by(child)


async def test_a_pid_that_is_neither_the_servers_child_nor_the_runs_is_never_signalled(
    guardian: Lifeline, marker: str
) -> None:
    # As a recycled pid would be: the told child is gone, an unrelated process has its pid
    # (an orphan of another run, so not a child of the test that plays the server).
    shell = await start(f"{marker}-other", "sh", "-c", "sleep 1000 >/dev/null & echo $!")
    assert shell.stdout is not None
    other = int(await asyncio.wait_for(shell.stdout.readline(), WAIT_S))
    assert await ended_by(shell) == 0
    guardian.tell({"child": 1, "pid": other, "marker": marker})
    assert await guardian.server_dies() == (0, "")
    try:
        assert _alive(other)
    finally:
        os.kill(other, signal.SIGKILL)  # by pid: the orphan this test started, still alive
    assert await poll_until(lambda: not _alive(other), WAIT_S)


async def test_a_child_of_no_run_is_known_as_the_servers_own_child() -> None:
    # A version probe, a git command: no run marker, but the server's child, which the
    # server's death leaves to init.
    async with guarding("sh", "-c", WITH_A_CHILD) as guardian:
        assert guardian.server.stdout is not None
        child = int(await asyncio.wait_for(guardian.server.stdout.readline(), WAIT_S))
        guardian.tell({"child": 1, "pid": child, "marker": ""})
        await guardian.taken()  # while the server lives, as a running server's guardian does
        code, logged = await guardian.server_dies()
    assert code == 0
    assert await poll_until(lambda: not _alive(child), WAIT_S)
    assert "SIGTERM sent to 1 process of its 0 runs; none was left" in logged, logged


async def test_the_lifelines_end_while_the_server_lives_is_not_its_death(
    guardian: Lifeline, marker: str
) -> None:
    # A server leaving with children still running closes the lifeline without a `bye`:
    # the guardian ends them once the server is gone, not before.
    child = await start(marker, "sleep", "1000")
    guardian.tell({"child": 1, "pid": child.pid, "marker": marker})
    guardian.close()
    done = asyncio.ensure_future(guardian.process.wait())
    await asyncio.wait([done, asyncio.ensure_future(child.wait())], timeout=0.5)
    assert not done.done() and child.returncode is None  # both still running
    code, _ = await guardian.server_dies()
    assert code == 0
    assert await ended_by(child) == -signal.SIGTERM


@pytest.fixture
def instance_cgroup() -> Iterator[cgroups.Group]:
    """An instance cgroup as a server's (removed after the test if the guardian did not)."""
    hierarchy = cgroups.find_hierarchy()
    if hierarchy is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    group = cgroups.Group(hierarchy.root / f"test-guardian-{uuid.uuid4().hex}")
    group.path.mkdir()
    try:
        yield group
    finally:
        for below in group.children():
            below.kill()
            below.remove()
        group.remove()


async def test_every_member_of_the_instances_cgroups_is_ended_escapers_included(
    guardian: Lifeline, instance_cgroup: cgroups.Group, marker: str
) -> None:
    inside = instance_cgroup.child("1-run")
    # Left its session and cleared its environment: only its cgroup still tells it.
    escaper = "env -i setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; exec sleep 1000"
    child = await start(marker, *cgroups.entering(inside, ("sh", "-c", escaper), pwd=None))
    assert child.stdout is not None
    escaped = int(await asyncio.wait_for(child.stdout.readline(), WAIT_S))
    guardian.tell({"cgroup": str(instance_cgroup.path)})
    code, logged = await guardian.server_dies()
    assert code == 0
    assert await ended_by(child) == -signal.SIGTERM
    assert await poll_until(lambda: not _alive(escaped), WAIT_S)
    assert not instance_cgroup.path.exists()  # emptied, then removed
    assert "SIGTERM sent to 2 processes of its 0 runs; none was left" in logged, logged


async def test_a_sweep_handed_over_is_killed_after_its_grace_strays_by_marker_included(
    guardian: Lifeline, marker: str
) -> None:
    # What the server sent SIGTERM (it ignores it), and a process forked since that
    # carries one of the markers: both get SIGKILL once the grace left is over.
    ignores = await stubborn(marker)
    forked = await start(marker, "sleep", "1000")
    ignores.send_signal(signal.SIGTERM)  # as the server did: it ignores it
    told = [[ignores.pid, cgroups.start_ticks(ignores.pid)]]
    sweep = {"cgroups": [], "pids": told, "markers": [marker], "grace_left_s": 1.0}
    guardian.tell({"sweep": sweep}, {"bye": True})
    code, logged = await guardian.server_dies()
    assert code == 0
    assert await ended_by(ignores) == -signal.SIGKILL
    assert await ended_by(forked) == -signal.SIGKILL
    # On a pipe, said at once (its reader waits for its end): what is due, and when.
    said = f"server {guardian.server.pid} handed over ending 1 process left by gone servers"
    assert re.search(rf"{said}: SIGKILL to what is left in [01]\.\d s$", logged, re.M), logged


async def test_a_sweep_handed_over_is_said_once_done_in_a_log_file(
    tmp_path: Path, marker: str
) -> None:
    async with guarding("sleep", "1000", log=tmp_path / "server.log") as guardian:
        ignores = await stubborn(marker)
        told = [[ignores.pid, cgroups.start_ticks(ignores.pid)]]
        sweep = {"cgroups": [], "pids": told, "markers": [], "grace_left_s": 0.5}
        guardian.tell({"sweep": sweep}, {"bye": True})
        code, logged = await guardian.server_dies()
    assert code == 0
    assert await ended_by(ignores) == -signal.SIGKILL
    said = f"server {guardian.server.pid} handed over ending 1 process left by gone servers"
    assert logged.count("\n") == 1 and logged.endswith(
        f"{said}: SIGKILL to the 1 left after the grace\n"
    ), logged


async def test_a_sweep_handed_over_waits_out_its_grace_holding_the_gone_instances_lock(
    instance_cgroup: cgroups.Group, marker: str, tmp_path: Path
) -> None:
    async with guarding("sleep", "1000", log=tmp_path / "server.log") as guardian:
        await _sweep_with_a_lock(guardian, instance_cgroup, marker)


async def _sweep_with_a_lock(
    guardian: Lifeline, instance_cgroup: cgroups.Group, marker: str
) -> None:
    inside = instance_cgroup.child("1-run")
    child = await stubborn(marker, *cgroups.entering(inside, (), pwd=None))
    assert inside.pids() == [child.pid]
    child.send_signal(signal.SIGTERM)  # as the server did: it ignores it
    sweep = {
        "cgroups": [str(instance_cgroup.path)],
        "pids": [[child.pid, cgroups.start_ticks(child.pid)]],
        "markers": [],
        "grace_left_s": 600.0,
    }
    guardian.tell({"sweep": sweep}, {"bye": True})
    guardian.server.kill()  # the server exits after its bye (by pid: the stand-in)
    await asyncio.wait_for(guardian.server.wait(), WAIT_S)
    # Once the server is gone, the guardian holds the instance's lock: no server sweeps it.
    assert await poll_until(lambda: not _lockable(instance_cgroup), WAIT_S)
    assert guardian.process.returncode is None and child.returncode is None  # in the grace
    child.kill()  # by pid: the process this test started; the grace need not run out
    assert await ended_by(child) == -signal.SIGKILL
    code, logged = await guardian.server_dies()
    assert code == 0
    assert not instance_cgroup.path.exists()  # emptied, then removed
    said = f"server {guardian.server.pid} handed over ending 1 process left by gone servers"
    assert logged.endswith(f"{said}: none was left\n"), logged


def _lockable(group: cgroups.Group) -> bool:
    """True if the cgroup's lock can be taken now (it is then let go at once)."""
    try:
        fd = os.open(group.path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def _unread(fd: int) -> int:
    """Bytes written to the pipe and not read yet."""
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


def _alive(pid: int) -> bool:
    """Running, not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return False
