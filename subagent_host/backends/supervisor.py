"""Start, watch and end child process trees: the only code that spawns, signals and reaps.

Callers (the run scheduler) hand over a `LaunchSpec` and an `OutputSink`; the
supervisor starts the child in its own session, drains stdout and stderr
concurrently into the sink, reports how it exited, and on request ends the
whole tree with the stop sequence of RELIABILITY.md ("Killing a process tree"):

    snapshot (psutil descendants + adopted orphans carrying the run's marker)
    -> SIGTERM the group and every member outside it -> wait up to the grace
    -> re-snapshot -> SIGKILL the group and every straggler -> reap.

The server is made a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`), so a
double-forked daemon is reparented to us instead of PID 1: we can find it (by
the `SUBAGENT_HOST_RUN_ID` marker in its environment) and reap it. Direct
children are signalled through a pidfd, so a reused pid is never hit. Every
blocking psutil call runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import enum
import fcntl
import logging
import os
import signal
import sys
from collections.abc import Mapping
from typing import Final, Protocol

import attrs
import psutil

logger = logging.getLogger(__name__)

RUN_MARKER: Final = "SUBAGENT_HOST_RUN_ID"
PR_SET_CHILD_SUBREAPER: Final = 36
READ_CHUNK: Final = 64 * 1024
# Pipe capacity for a child's stdout and stderr (the default is 64 KiB).
OUTPUT_PIPE_BYTES: Final = 1024 * 1024
# Once the direct child has exited, a grandchild may still hold its pipes open
# (`sh -c "sleep 30 & echo done"`); waiting for EOF longer than this would hang
# the run, so the rest of the tree is ended instead.
DRAIN_AFTER_EXIT_S: Final = 2.0
# Processes left holding the pipes after the direct child exited get this long
# to go on SIGTERM: the run itself is already over.
LEFTOVER_GRACE_S: Final = 0.5
# How long after a SIGCHLD the sweep for exited orphans runs: one sweep then
# covers a whole burst of exits.
REAP_DELAY_S: Final = 0.2
# After SIGKILL the kernel ends processes promptly; this only bounds the wait
# for a process stuck in uninterruptible sleep (D state).
KILL_WAIT_S: Final = 5.0
# psutil's create times have 10 ms resolution.
CREATE_TIME_TOLERANCE_S: Final = 0.01


@attrs.frozen
class LaunchSpec:
    """What to execute: everything is already resolved and checked by the caller."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    """The child's whole environment (allowlisted by the caller), including the marker."""
    stdin: bytes | None = None
    """Written to the child's stdin, which is then closed (it is closed in any case)."""


class OutputSink(Protocol):
    """Receives the child's output as it arrives; must not block."""

    def on_stdout(self, data: bytes) -> None: ...

    def on_stderr(self, data: bytes) -> None: ...


@attrs.frozen
class ExitStatus:
    """How the direct child ended: an exit code, or the signal that killed it."""

    exit_code: int | None
    signal: int | None

    @classmethod
    def from_returncode(cls, returncode: int) -> ExitStatus:
        if returncode < 0:
            return cls(exit_code=None, signal=-returncode)
        return cls(exit_code=returncode, signal=None)


class StopStep(enum.Enum):
    """Which step of the stop sequence left nothing alive."""

    NOTHING_LEFT = "nothing-left"  # the tree was already gone
    SIGTERM = "sigterm"
    SIGKILL = "sigkill"


@attrs.frozen
class StopOutcome:
    step: StopStep
    signalled: int
    """How many processes the sequence signalled."""


@attrs.frozen
class TreeUsage:
    """One sample of a child's tree: CPU seconds so far, resident memory, process count."""

    cpu_seconds: float
    rss_bytes: int
    processes: int


class Child:
    """One started child process and the tree below it."""

    def __init__(
        self,
        transport: asyncio.SubprocessTransport,
        process: asyncio.subprocess.Process,
        exited: asyncio.Future[None],
        pidfd: int | None,
        marker: str,
        create_time: float,
    ) -> None:
        self.transport = transport
        self.process = process
        self.exited = exited
        """Done as soon as the child has exited and been reaped. (asyncio's
        `Process.wait()` also waits for the pipes to close, which a lingering
        grandchild can delay forever.)"""
        self.pid = process.pid
        self.pgid = process.pid  # start_new_session: the child leads its own group
        self.marker = marker
        self.create_time = create_time
        self.pidfd = pidfd
        self.drained: asyncio.Task[None] | None = None

    def has_exited(self) -> bool:
        return self.exited.done() or self.process.returncode is not None

    def __repr__(self) -> str:
        code = self.process.returncode
        state = "running" if code is None else f"exited {code}"
        return f"<Child pid={self.pid} {state}>"

    def send_signal(self, signum: int) -> bool:
        """Signal the direct child only if it is still the process we started."""
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signum)
            except ProcessLookupError:
                return False
            return True
        if self.process.returncode is None:  # unreaped: the pid cannot have been reused
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signum)
                return True
        return False

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class _ChildProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's subprocess protocol, delivering output straight to the sink.

    Output goes to the sink as the event loop reads it: no stream buffer and no
    reader task per pipe. `exited` is done the moment the child exits;
    `outputs_closed` once both stdout and stderr reached EOF.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, sink: OutputSink) -> None:
        super().__init__(limit=READ_CHUNK, loop=loop)
        self._sink = sink
        self._open_outputs = {1, 2}
        self.exited: asyncio.Future[None] = loop.create_future()
        self.outputs_closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        assert isinstance(data, bytes)
        if fd == 1:
            self._sink.on_stdout(data)
        else:
            self._sink.on_stderr(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        super().pipe_connection_lost(fd, exc)
        self._open_outputs.discard(fd)
        if not self._open_outputs and not self.outputs_closed.done():
            self.outputs_closed.set_result(None)

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


def _widen_output_pipes(transport: asyncio.SubprocessTransport) -> None:
    """Let a chatty child get further ahead of us: fewer, larger reads (Linux pipes only)."""
    if not hasattr(fcntl, "F_SETPIPE_SZ"):
        return
    for fd in (1, 2):
        pipe = transport.get_pipe_transport(fd)
        source = pipe.get_extra_info("pipe") if pipe is not None else None
        if source is not None:
            # Over the pipe-max-size limit (OSError), or already closed (ValueError): keep it.
            with contextlib.suppress(OSError, ValueError):
                fcntl.fcntl(source.fileno(), fcntl.F_SETPIPE_SZ, OUTPUT_PIPE_BYTES)


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (ProcessLookupError, AttributeError, OSError):
        return None  # already exited (and reaped), or no pidfd support here


def become_subreaper() -> bool:
    """Make this process the reaper of orphans from its descendants (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        logger.warning("cannot become a child subreaper: errno %d", ctypes.get_errno())
        return False
    return True


class Supervisor:
    """Starts children, drains them, and ends their trees. One per server."""

    def __init__(self) -> None:
        self.is_subreaper = become_subreaper()
        self._started: set[int] = set()  # pids asyncio waits for; never reaped by us
        # A sweep of adopted orphans must not run while a child is being forked:
        # until its pid is in `_started`, a fresh child that exits at once would
        # look adopted and have its exit status stolen from asyncio.
        self._fork_or_reap = asyncio.Lock()
        self._sweep: asyncio.TimerHandle | None = None
        self._sweeping: set[asyncio.Task[int]] = set()
        self.reaped = asyncio.Event()  # set whenever an adopted orphan was reaped

    def reap_on_sigchld(self) -> None:
        """Reap adopted orphans as they exit, not only when a run ends (main thread only)."""
        asyncio.get_running_loop().add_signal_handler(signal.SIGCHLD, self._on_sigchld)

    def _on_sigchld(self) -> None:
        # Every child exit raises SIGCHLD; sweeps cost a /proc scan, so a burst of
        # them is answered by one sweep a moment later.
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(REAP_DELAY_S, self._start_sweep)

    def _start_sweep(self) -> None:
        self._sweep = None
        task = asyncio.get_running_loop().create_task(self.reap_adopted())
        self._sweeping.add(task)
        task.add_done_callback(self._sweeping.discard)

    async def start(self, spec: LaunchSpec, sink: OutputSink) -> Child:
        """Start `spec` in a new session and begin draining its output into `sink`.

        Raises OSError (e.g. FileNotFoundError) when the program cannot be started.
        """
        marker = spec.env.get(RUN_MARKER, "")
        loop = asyncio.get_running_loop()
        async with self._fork_or_reap:
            # What create_subprocess_exec does, with a protocol that reports the exit itself.
            transport, protocol = await loop.subprocess_exec(
                lambda: _ChildProtocol(loop, sink),
                *spec.argv,
                cwd=spec.cwd,
                env=dict(spec.env),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            process = asyncio.subprocess.Process(transport, protocol, loop)
            self._started.add(process.pid)
        _widen_output_pipes(transport)
        pidfd = _open_pidfd(process.pid)  # at once: the sooner, the likelier it is unreaped
        create_time = await asyncio.to_thread(_create_time, process.pid)
        child = Child(transport, process, protocol.exited, pidfd, marker, create_time)
        child.drained = asyncio.create_task(_drain(child, spec.stdin, protocol.outputs_closed))
        return child

    async def wait(self, child: Child) -> ExitStatus:
        """Wait for the child to exit and its output to be drained (bounded), then reap."""
        await _exited(child)
        assert child.drained is not None
        try:
            await asyncio.wait_for(asyncio.shield(child.drained), DRAIN_AFTER_EXIT_S)
        except TimeoutError:
            # A descendant still holds the pipes: end it, then the pipes close.
            logger.info("%r exited but its pipes stay open; ending the rest of its tree", child)
            await self.stop(child, grace_s=LEFTOVER_GRACE_S)
            try:
                await asyncio.wait_for(child.drained, KILL_WAIT_S)
            except TimeoutError:
                # Something unkillable (D state) still holds a pipe: stop reading it.
                logger.error("%r: its pipes stay open after the tree was ended", child)
                child.transport.close()
        returncode = child.process.returncode
        assert returncode is not None  # set when the exit was reported, before `exited`
        self._started.discard(child.pid)
        child.close()
        return ExitStatus.from_returncode(returncode)

    async def stop(self, child: Child, grace_s: float) -> StopOutcome:
        """End the child's whole tree: SIGTERM, up to `grace_s` seconds, then SIGKILL."""
        members = await asyncio.to_thread(self._snapshot, child)
        try:
            if not members and child.has_exited():
                return StopOutcome(StopStep.NOTHING_LEFT, 0)
            signalled = _signal_tree(child, members, signal.SIGTERM)
            if await _wait_exited(child, members, grace_s):
                return StopOutcome(StopStep.SIGTERM, signalled)
            stragglers = await asyncio.to_thread(self._snapshot, child)
            members += stragglers
            _signal_tree(child, stragglers, signal.SIGKILL)
            if not await _wait_exited(child, stragglers, KILL_WAIT_S):
                logger.error("%r: processes survived SIGKILL for %.0f s", child, KILL_WAIT_S)
            return StopOutcome(StopStep.SIGKILL, signalled)
        finally:
            for member in members:
                member.close()
            await self.reap_adopted()

    def _snapshot(self, child: Child) -> list[Member]:
        """Every live process of the child's tree, each pinned by a pidfd.

        Descendants of the direct child, plus adopted orphans carrying its run
        marker (and their descendants). Runs in a worker thread.
        """
        found: dict[int, psutil.Process] = {}
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(child.pid)
            if abs(root.create_time() - child.create_time) < CREATE_TIME_TOLERANCE_S:
                for process in root.children(recursive=True):
                    found[process.pid] = process
        if child.marker:
            for process in self._adopted():
                if process.pid not in found and _carries_marker(process, child.marker):
                    found[process.pid] = process
                    with contextlib.suppress(psutil.Error):
                        for below in process.children(recursive=True):
                            found.setdefault(below.pid, below)
        members = [Member.pin(process) for process in found.values()]
        return [member for member in members if member is not None]

    async def sample(self, children: list[Child], *, trees: bool) -> dict[int, TreeUsage]:
        """Measure each child (with `trees`, its whole tree), by child pid. Off the loop.

        One call walks /proc once for all children: the cost of sampling does
        not grow with the number of children.
        """
        return await asyncio.to_thread(self._sample_now, children, trees)

    def _sample_now(self, children: list[Child], trees: bool) -> dict[int, TreeUsage]:
        below: dict[int, list[int]] = {}
        if trees:
            for process in psutil.process_iter(["ppid"]):
                below.setdefault(process.info["ppid"], []).append(process.pid)
        usages: dict[int, TreeUsage] = {}
        for child in children:
            members, cpu, rss = [child.pid], 0.0, 0
            for pid in members:  # grows as it goes: a breadth-first walk of the tree
                members.extend(below.get(pid, ()))
            count = 0
            for pid in members:
                with contextlib.suppress(psutil.Error):
                    process = psutil.Process(pid)
                    if pid == child.pid and abs(process.create_time() - child.create_time) >= (
                        CREATE_TIME_TOLERANCE_S
                    ):
                        break  # the pid is someone else's now
                    with process.oneshot():
                        times = process.cpu_times()
                        cpu += times.user + times.system
                        rss += process.memory_info().rss
                    count += 1
            if count:
                usages[child.pid] = TreeUsage(cpu_seconds=cpu, rss_bytes=rss, processes=count)
        return usages

    def _adopted(self) -> list[psutil.Process]:
        """Our own children that we did not start: orphans reparented to us."""
        try:
            return [p for p in psutil.Process().children() if p.pid not in self._started]
        except psutil.Error:
            return []

    async def reap_adopted(self) -> int:
        """Reap adopted orphans that have exited (never `waitpid(-1)`: asyncio owns the rest)."""
        async with self._fork_or_reap:
            reaped = await asyncio.to_thread(self._reap_adopted_now)
        if reaped:
            self.reaped.set()
        return reaped

    def _reap_adopted_now(self) -> int:
        reaped = 0
        for process in self._adopted():
            with contextlib.suppress(ChildProcessError, psutil.Error):
                if process.status() == psutil.STATUS_ZOMBIE:
                    pid, _ = os.waitpid(process.pid, os.WNOHANG)
                    reaped += pid == process.pid
        return reaped


async def _drain(child: Child, stdin: bytes | None, outputs_closed: asyncio.Future[None]) -> None:
    """Feed stdin (then close it) while the output pipes run to EOF."""
    assert child.process.stdin is not None
    await asyncio.gather(_feed(child.process.stdin, stdin), asyncio.shield(outputs_closed))


async def _feed(pipe: asyncio.StreamWriter, data: bytes | None) -> None:
    # Always close stdin: agent CLIs wait for EOF before they start.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if data:
            pipe.write(data)
            await pipe.drain()
        pipe.close()
        await pipe.wait_closed()


def _create_time(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def _signal_tree(child: Child, members: list[Member], signum: int) -> int:
    """Signal the direct child, its group, then every member (some left the group).

    The group is signalled only while it verifiably exists (a pinned member still
    carries its id), so a recycled group id is never hit.
    """
    count = int(child.send_signal(signum))
    if any(member.pgid == child.pgid for member in members):
        # Group first: killpg also reaches members forked since the snapshot.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pgid, signum)
    return count + sum(member.send_signal(signum) for member in members)


async def _wait_exited(child: Child, members: list[Member], timeout_s: float) -> bool:
    """Wait up to `timeout_s` for the direct child and every member to have exited.

    A pidfd becomes readable when its process exits, so this is event-driven
    for every process, ours or not.
    """
    loop = asyncio.get_running_loop()
    waits: list[asyncio.Future[object]] = [asyncio.ensure_future(_exited(child))]
    watched: list[int] = []
    for member in members:
        if member.pidfd is None:
            continue
        exited: asyncio.Future[object] = loop.create_future()
        loop.add_reader(member.pidfd, _set_once, exited)
        watched.append(member.pidfd)
        waits.append(exited)
    try:
        _, pending = await asyncio.wait(waits, timeout=timeout_s)
    finally:
        for fd in watched:
            loop.remove_reader(fd)
    for future in pending:
        future.cancel()
    return not pending


async def _exited(child: Child) -> None:
    """Return once the direct child has exited (whether or not it has been reaped)."""
    await asyncio.shield(child.exited)


def _set_once(future: asyncio.Future[object]) -> None:
    if not future.done():
        future.set_result(None)


@attrs.define
class Member:
    """A process of a tree, pinned by a pidfd so a recycled pid is never signalled."""

    pid: int
    pgid: int | None
    pidfd: int | None

    @classmethod
    def pin(cls, process: psutil.Process) -> Member | None:
        """Open a pidfd, then check it is still the process psutil saw (create time)."""
        pidfd = _open_pidfd(process.pid)
        try:
            if pidfd is None or not process.is_running():  # is_running compares create time
                raise psutil.NoSuchProcess(process.pid)
            if process.status() == psutil.STATUS_ZOMBIE:
                raise psutil.NoSuchProcess(process.pid)  # exited: nothing to signal or wait for
            return cls(pid=process.pid, pgid=os.getpgid(process.pid), pidfd=pidfd)
        except (psutil.Error, ProcessLookupError):
            if pidfd is not None:
                os.close(pidfd)
            return None

    def send_signal(self, signum: int) -> bool:
        if self.pidfd is None:
            return False
        try:
            signal.pidfd_send_signal(self.pidfd, signum)
        except ProcessLookupError:
            return False
        return True

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _carries_marker(process: psutil.Process, marker: str) -> bool:
    try:
        return process.environ().get(RUN_MARKER) == marker
    except psutil.Error:
        return False
