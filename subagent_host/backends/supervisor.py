"""Start, watch and end child process trees: the only code that spawns, signals and reaps.

Callers (the run scheduler) hand over a `LaunchSpec` and an `OutputSink`; the
supervisor starts the child in its own session, drains stdout and stderr
concurrently into the sink, reports how it exited, and on request ends the
whole tree with the stop sequence of RELIABILITY.md ("Killing a process tree"):

    snapshot the tree -> SIGTERM the group and every member outside it
    -> wait up to the grace -> re-snapshot -> SIGKILL the group, every
    straggler (and the child's cgroup) -> reap.

What "the tree" is depends on the tracking mode chosen at start (tracking.py):
the child's cgroup, or its descendants plus the orphans carrying its run
marker (`SUBAGENT_HOST_RUN_ID`). When the direct child exits, whatever is left
of its tree is ended the same way, with `LEFTOVER_GRACE_S`, before `wait`
returns: no run is reported ended while a process it started lives on.

Direct children are watched and signalled through a pidfd, so a reused pid is
never hit, and reaped with `wait4` the moment they exit. Scans of the process
table run in a worker thread; the loop only ever reads small /proc or cgroup files.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import errno
import functools
import logging
import os
import resource
import select
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs

from subagent_host.backends import cgroups, pipes, programs
from subagent_host.backends.cgroups import Group, entering
from subagent_host.backends.exits import ProcessExit, StoppedBy
from subagent_host.backends.lifeline import Guardian, GuardianLog, SweepLeft
from subagent_host.backends.liveness import START_TOLERANCE_S, process_create_time
from subagent_host.backends.tracking import Tracking, TrackingMode, choose
from subagent_host.values.words import plural


class _OnFirstUse:
    """psutil, imported when a process is first looked at, not with this module: its
    import costs 15-20 ms of every server's start, before the first reply. The import
    lock makes two threads' first uses safe."""

    def __getattr__(self, name: str) -> Any:
        import psutil

        return getattr(psutil, name)


if TYPE_CHECKING:
    import psutil
else:
    psutil = _OnFirstUse()

logger = logging.getLogger(__name__)

RUN_MARKER: Final = "SUBAGENT_HOST_RUN_ID"
# Once the direct child has exited, a grandchild may still hold its pipes open
# (`sh -c "sleep 30 & echo done"`); waiting for EOF longer than this would hang
# the run, so the rest of the tree is ended instead.
DRAIN_AFTER_EXIT_S: Final = 2.0
# Processes still alive once the direct child has exited (or its final event
# was printed) get this long to go on SIGTERM before SIGKILL: the child's own
# work is over, so this is short, and a child that left nothing waits for none.
LEFTOVER_GRACE_S: Final = 0.5
# A cgroup whose processes were all SIGKILLed is empty moments later; this is
# how often it is checked until then (bounded by KILL_WAIT_S).
EMPTY_CHECK_S: Final = 0.01
# How often the server tries to leave a child's cgroup it stepped into to fork the child.
HOME_ATTEMPTS: Final = 3
# After SIGKILL the kernel ends processes promptly; this only bounds the wait
# for a process stuck in uninterruptible sleep (D state).
KILL_WAIT_S: Final = 5.0


@attrs.frozen
class LaunchSpec:
    """What to execute: everything is already resolved and checked by the caller."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    """The child's whole environment (allowlisted by the caller), including the marker."""
    stdin: bytes | None = None
    """Written to the child's stdin, which is then closed (it is closed in any case)."""
    placement: Mapping[str, Any] | None = None
    """Where on a cluster it may run (protocol.md §8.8: `resources`, `nodeId`, `labels`),
    for a cluster executor; the supervisor runs everything here and never gets one."""
    placement_wait_s: float | None = None
    """The most a cluster executor may wait for a node that can hold it (None: its own
    bound); the supervisor starts at once."""
    keep_stdin: bool = False
    """Leave stdin open after `stdin`: the caller writes more with `Child.input.send`
    and ends it with `Child.input.close()` (a child that reads commands there)."""
    name: str = "child"
    """Names the child's cgroup (after a sequence number), e.g. its run, index and attempt."""
    log_fields: Mapping[str, object] = attrs.field(factory=dict)
    """What the supervisor's log lines about the child carry besides its `pid` (its
    `runId` and `index`: logs.py writes them in a JSON line)."""


class OutputSink(Protocol):
    """Receives the child's output as it arrives; must not block."""

    def on_stdout(self, data: bytes) -> None: ...

    def on_stderr(self, data: bytes) -> None: ...


class StopStep(enum.Enum):
    """Which step of the stop sequence left nothing alive."""

    NOTHING_LEFT = "nothing-left"  # the tree was already gone
    SIGTERM = "sigterm"
    SIGKILL = "sigkill"


@attrs.frozen
class TreeStopReport:
    """What one run of the stop sequence did to a child's tree."""

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
    """One started child process and the tree below it.

    The child is reaped here, the moment its pidfd reports the exit (no
    watcher thread), with `wait4` so its own resource usage comes along.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        popen: subprocess.Popen[bytes],
        pidfd: int | None,
        marker: str,
        group: Group | None = None,
        log_fields: Mapping[str, object] | None = None,
    ) -> None:
        self._loop = loop
        # Held until reaped: a Popen collected with no returncode would waitpid()
        # from its finaliser and could steal the exit status.
        self._popen = popen
        self.pid = popen.pid
        self.pgid = popen.pid  # start_new_session: the child leads its own group
        self.node: str | None = None  # this machine
        self.marker = marker
        self.pidfd = pidfd
        self.group = group
        """The child's own cgroup (cgroup tracking): its whole tree, escapers included."""
        self.log_fields = {**(log_fields or {}), "pid": self.pid}
        """The `extra` of a log line about it (`Supervisor.stop`'s steps)."""
        self.leftovers_ended = 0
        """Processes of its tree other than itself that the stop sequence ended."""
        self.stopped_by = StoppedBy.EXIT
        """The last signal of a stop sequence that found it still running, if any."""
        self._create_time: float | None = None
        self._reaping = False
        self.returncode: int | None = None
        self.usage: TreeUsage | None = None
        """Known once `wait` is done: the CPU time of the whole tree (its cgroup's), else
        of the child and its reaped descendants (wait4); peak memory only from a
        cgroup's memory controller (0 otherwise: wait4's peak includes the server's
        own memory, inherited by the fork)."""
        self.exited: asyncio.Future[None] = loop.create_future()
        """Done as soon as the child has exited and been reaped, whether or not a
        grandchild still holds its pipes."""
        self._exit_listeners: list[Callable[[], None]] = []
        self.outputs: list[pipes.OutputPipe] = []
        self.input: pipes.InputPipe | None = None
        """Its stdin, while open (`LaunchSpec.keep_stdin`: until the caller closes it)."""
        self.drained: asyncio.Future[list[None]] | None = None
        """Done once stdin was written and closed and both outputs reached EOF."""
        if pidfd is not None:
            loop.add_reader(pidfd, self.reap)
        else:  # no pidfd (old kernel): a thread waits, as asyncio's own watcher does
            threading.Thread(target=self._wait_in_thread, daemon=True).start()

    def has_exited(self) -> bool:
        return self.returncode is not None

    def on_exit(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` in the step the child is reaped (at once if it was already);
        return the function that removes it.

        `exited`'s done callbacks run one turn of the loop after the reap; whoever
        is woken by them takes one more. A child's end is on the path of its run's
        answer, so its supervision listens here instead.
        """
        if self.has_exited():
            listener()
            return _no_removal
        self._exit_listeners.append(listener)
        return functools.partial(_discard, self._exit_listeners, listener)

    def pid_is_ours(self) -> bool:
        """True while the pid still names this child: until we reap it, it cannot
        be reused. Safe to call from a worker thread."""
        return not self._reaping and self.returncode is None

    def create_time(self) -> float | None:
        """The child's start time as psutil reports it, None once it was reaped.

        Read on first use, not at start: just after the fork the child is busy
        in exec and holds the lock /proc/<pid>/stat needs, so reading it then
        costs more than the whole rest of a start. May block briefly: call it
        off the loop.
        """
        if self._create_time is None and self.pid_is_ours():
            created = process_create_time(self.pid)
            if self.pid_is_ours():  # not reaped meanwhile: the reading was of our child
                self._create_time = created
        return self._create_time

    def __repr__(self) -> str:
        state = "running" if self.returncode is None else f"exited {self.returncode}"
        return f"<Child pid={self.pid} {state}>"

    def reap(self) -> None:
        """Reap the child if it has exited (called when its pidfd becomes readable)."""
        if self.returncode is not None:
            return
        self._reaping = True  # from here the pid may be freed: threads keep off it
        try:
            pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped by someone else: a bug, but never hang on it
            logger.error(
                "%r was reaped elsewhere; its exit status is lost", self, extra=self.log_fields
            )
            pid, status, rusage = self.pid, 255 << 8, None
        if pid == 0:
            self._reaping = False
            return  # not exited yet (a spurious wake-up)
        self._exited(status, rusage)

    def _wait_in_thread(self) -> None:
        # WNOWAIT: block until it exits but leave the reaping to the loop, as with a pidfd.
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        self._loop.call_soon_threadsafe(self.reap)

    def _exited(self, status: int, rusage: resource.struct_rusage | None) -> None:
        if self.pidfd is not None:
            self._loop.remove_reader(self.pidfd)
        self.returncode = os.waitstatus_to_exitcode(status)
        self._popen.returncode = self.returncode  # so its finaliser leaves the pid alone
        if rusage is not None:
            self.usage = TreeUsage(
                cpu_seconds=rusage.ru_utime + rusage.ru_stime, rss_bytes=0, processes=1
            )
        if not self.exited.done():
            self.exited.set_result(None)
        listeners, self._exit_listeners = self._exit_listeners, []
        for listener in listeners:
            listener()

    def send_signal(self, signum: int) -> bool:
        """Signal the direct child only if it is still the process we started."""
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signum)
            except ProcessLookupError:
                return False
            return True
        if self.returncode is None:  # unreaped: the pid cannot have been reused
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)
                return True
        return False

    def end_with(self, signum: int) -> bool:
        """Send the stop sequence's SIGTERM or SIGKILL; remember it if the child still ran.

        An exit not yet noticed is reaped first, so a child that exited on its
        own just before the stop sequence reached it stays `exit`.
        """
        self.reap()
        if self.has_exited():
            return False
        sent = self.send_signal(signum)
        if sent:
            self.stopped_by = StoppedBy.SIGKILL if signum == signal.SIGKILL else StoppedBy.SIGTERM
        return sent

    def hold_output(self) -> None:
        """Stop reading the child's stdout and stderr for now (their reader is slow; a
        streamed child's stderr is streamed too): it blocks on write."""
        for pipe in self.outputs:
            pipe.pause()

    def release_output(self) -> None:
        for pipe in self.outputs:
            pipe.resume()

    def read_remains(self) -> None:
        """Its tree is gone: read what its pipes still hold, held back or not (bounded by
        their capacity), so that its end waits for no slow client."""
        for pipe in self.outputs:
            pipe.read_remains()

    def stop_reading(self) -> None:
        """Give up on the output pipes (something unkillable holds them)."""
        for pipe in self.outputs:
            pipe.close()

    def close(self) -> None:
        if self.pidfd is not None:
            if self.returncode is None:
                self._loop.remove_reader(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None


def _no_removal() -> None:
    pass


def _discard(listeners: list[Callable[[], None]], listener: Callable[[], None]) -> None:
    with contextlib.suppress(ValueError):
        listeners.remove(listener)


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (ProcessLookupError, AttributeError, OSError):
        return None  # already exited (and reaped), or no pidfd support here


class SweepHandedOver(Exception):
    """A sweep of gone servers' leftovers handed the rest to the guardian (the server is
    leaving, `Supervisor.hand_over_sweeps`): it finishes it once the server has said bye."""

    def __init__(self, processes: int, grace_left_s: float) -> None:
        super().__init__(processes, grace_left_s)
        self.processes = processes
        """How many processes sent SIGTERM were still running, handed over."""
        self.grace_left_s = grace_left_s
        """What was left of their grace (the guardian gives them all of it)."""


class Supervisor:
    """Starts children, drains them, and ends their trees. One per server."""

    starts_at_once: Final = True  # as the local executor: a start never waits to be placed

    def __init__(self, tracking: Tracking | None = None) -> None:
        self.tracking = tracking if tracking is not None else choose()
        # Children we started, by pid, until `wait` is done with them. Every other
        # child of ours is an adopted orphan. A child is registered in the same
        # synchronous step that forks it, so no sweep can mistake it for one.
        self._started: dict[int, Child] = {}
        self.reaped = asyncio.Event()  # set whenever an adopted orphan was reaped
        # Processes a stop sequence is ending, and for which child. Without cgroups,
        # two children ending at once may both find one orphan (it carries their
        # run's marker, or none); it is ended, and counted, by the first. Written
        # from snapshot threads, hence the lock.
        self._claimed: dict[int, Child] = {}
        self._claiming = threading.Lock()
        self.guardian: Guardian | None = None
        """Ends every child's tree if this server dies (`guard`); None: nothing does."""
        self._leaving = asyncio.Event()
        """Set by `hand_over_sweeps`: a sweep in its grace hands the rest to the guardian."""
        self._handed: list[cgroups.Gone] = []
        """Gone instances whose sweep the guardian finishes: locked until this server ends."""

    @property
    def mode(self) -> TrackingMode:
        return self.tracking.mode

    @property
    def is_subreaper(self) -> bool:
        return self.tracking.is_subreaper

    def guard(self, log: GuardianLog) -> None:
        """Start the guardian (lifeline.py): from now on, should this process die, whatever
        kills it, every child's tree is ended within moments. On the loop; never waits."""
        instance = self.tracking.instance
        self.guardian = Guardian(instance.path if instance is not None else None, log)
        self.guardian.start()
        for child in self._started.values():
            self.guardian.child_started(child, child.pid, child.marker)

    def close(self) -> None:
        """Remove this server's cgroups: call once every child has been waited for."""
        if self.guardian is not None:
            self.guardian.close()
        self.tracking.close()
        self._release_handed()

    async def aclose(self) -> None:
        """`close`, and wait (bounded) for the guardian to be gone (unless it finishes a
        sweep handed over: `hand_over_sweeps`)."""
        if self.guardian is not None:
            await self.guardian.aclose()
        self.tracking.close()
        self._release_handed()

    def hand_over_sweeps(self) -> bool:
        """The server is leaving: a sweep of gone servers' leftovers (`sweep_gone_instances`,
        `end_strays`) hands what it still ends to the guardian once it has sent SIGTERM,
        instead of waiting out their grace here, and raises `SweepHandedOver`. False, and
        nothing changes (the sweep is waited for), when no guardian listens to take it.
        """
        if self.guardian is None or not self.guardian.is_listening:
            return False
        self._leaving.set()
        return True

    def _release_handed(self) -> None:
        """Let go of the locks of the instances the guardian sweeps: last, as this process
        ends (the guardian takes them once it is gone)."""
        for instance in self._handed:
            instance.release()
        self._handed.clear()

    def reap_on_sigchld(self) -> None:
        """Reap adopted orphans as they exit, not only when a run ends (main thread only)."""
        asyncio.get_running_loop().add_signal_handler(signal.SIGCHLD, self._on_sigchld)

    def _on_sigchld(self) -> None:
        self.reap_exited()

    def reap_exited(self) -> int:
        """Reap every exited child now; return how many adopted orphans were reaped.

        `waitid(WNOWAIT)` names an exited child without reaping it: one of ours
        is reaped through its own `Child` (keeping its status and usage), any
        other is an adopted orphan and is simply reaped. Costs a system call per
        exited child, no /proc scan, so it runs on the loop at every SIGCHLD.
        """
        reaped = 0
        while True:
            try:
                exited = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break  # no children at all
            if exited is None:
                break
            ours = self._started.get(exited.si_pid)
            if ours is not None and not ours.has_exited():
                ours.reap()
                continue
            if self.guardian is not None and self.guardian.owns(exited.si_pid):
                self.guardian.reap()  # it died on its own: reaped, and another started
                continue
            with contextlib.suppress(ChildProcessError):
                os.waitpid(exited.si_pid, os.WNOHANG)
                reaped += 1
        if reaped:
            self.reaped.set()
        return reaped

    async def start(self, spec: LaunchSpec, sink: OutputSink) -> Child:
        """Start `spec` in a new session (and its own cgroup) and begin draining its output.

        Raises OSError (e.g. FileNotFoundError, or E2BIG for an argument over the
        kernel's limit) when the program cannot be started, also for values `exec`
        cannot take at all (a NUL, text that is not UTF-8): run-time templates can
        put those in an argv after every request-time check has passed.
        """
        loop = asyncio.get_running_loop()
        group = self._new_group(spec.name)
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        stderr_read, stderr_write = os.pipe()
        try:
            argv = spec.argv
            inside = group if group is not None and self._step_into(group) else None
            if group is not None and inside is None:
                # The trampoline execs the program itself: what exec would refuse
                # must still be refused here, as a start failure.
                programs.check_executable(argv[0], spec.cwd, spec.env.get("PATH"))
                argv = entering(group, argv, pwd=spec.env.get("PWD"))
            # Popen returns once the child has exec'd (vfork: a tenth of a
            # millisecond), as asyncio's own subprocess_exec does on the loop thread.
            try:
                popen = subprocess.Popen(  # noqa: ASYNC220
                    argv,
                    cwd=spec.cwd,
                    env=dict(spec.env),
                    stdin=stdin_read,
                    stdout=stdout_write,
                    stderr=stderr_write,
                    start_new_session=True,
                )
            except ValueError as exc:  # raised before any fork: nothing was started
                raise OSError(errno.EINVAL, _unexecutable(exc)) from None
            finally:
                if inside is not None:
                    self._step_home()
        except BaseException:
            for fd in (stdin_write, stdout_read, stderr_read):
                os.close(fd)
            if group is not None:
                group.remove()
            raise
        finally:
            for fd in (stdin_read, stdout_write, stderr_write):
                os.close(fd)  # the child's ends: EOF comes when its tree closes them
        # No await since the fork: nothing can have reaped it, the pid is still ours.
        pidfd = _open_pidfd(popen.pid)
        child = Child(loop, popen, pidfd, spec.env.get(RUN_MARKER, ""), group, spec.log_fields)
        self._started[child.pid] = child
        if self.guardian is not None:
            self.guardian.child_started(child, child.pid, child.marker)
        for fd in (stdout_read, stderr_read):
            pipes.widen(fd)
        child.outputs = [
            pipes.OutputPipe(loop, stdout_read, sink.on_stdout),
            pipes.OutputPipe(loop, stderr_read, sink.on_stderr),
        ]
        child.input = pipes.InputPipe(loop, stdin_write, spec.stdin, keep_open=spec.keep_stdin)
        child.drained = asyncio.gather(child.input.closed, *(pipe.closed for pipe in child.outputs))
        return child

    def _step_into(self, group: Group) -> bool:
        """Move this server into the child's cgroup, so that the fork starts the child there.

        Only where the server's own cgroup is an ancestor of the children's
        (`Tracking.home`): it then never looks empty to whoever watches it. The
        caller forks and steps home at once, in the same synchronous step of the
        loop: no kill of ours (`Group.kill`, always on the loop) can run while the
        server is inside, and no other server kills a cgroup of a live one.
        False (the trampoline then) where stepping is off or just failed.
        """
        if self.tracking.home is None:
            return False
        try:
            cgroups.move_self(group)
        except OSError as exc:
            logger.warning(
                "cannot enter cgroup %s (%s); children start through a shell", group, exc
            )
            self.tracking.home = None
            return False
        return True

    def _step_home(self) -> None:
        """Back to the server's own cgroup (right after the fork, whether or not it worked)."""
        home = self.tracking.home
        assert home is not None
        for _ in range(HOME_ATTEMPTS):
            try:
                cgroups.move_self(home)
                return
            except OSError as exc:
                failure = exc
        # Group.kill spares this server even so; later children use the trampoline.
        logger.error(
            "cannot go back to cgroup %s (%s); children start through a shell", home, failure
        )
        self.tracking.home = None

    def _new_group(self, name: str) -> Group | None:
        """The child's cgroup in cgroup mode; if it cannot be made, the child runs without,
        and so do later ones: the mode in force (`ping`) is no longer `cgroup`."""
        try:
            return self.tracking.place(name)
        except OSError as exc:
            mode = self.tracking.fall_back()
            logger.error(
                "cannot create a cgroup for %s (%s); process tracking is %s from now on",
                name,
                exc,
                mode.value,
            )
            return None

    async def wait(self, child: Child) -> ProcessExit:
        """Wait for the child to exit, end what its tree left, drain its output (bounded), reap.

        Returns only once no process of the child's tree is left (as far as the
        tracking mode can tell): the run it belongs to is then reported ended.
        """
        await _exited(child)
        finished = await self._end_leftovers(child)
        assert child.drained is not None
        try:
            if not child.drained.done():  # mostly it is: EOF comes with the exit
                # Output held back for a slow client is read now: the tree is gone, so
                # what waits is bounded, and the child's end must not wait for a client.
                child.read_remains()
                await asyncio.wait_for(asyncio.shield(child.drained), DRAIN_AFTER_EXIT_S)
        except TimeoutError:
            # A process the tracking could not tell was the child's holds the pipes
            # (the marker alone misses one that escaped and cleared its environment).
            logger.info(
                "%r exited but its pipes stay open; ending the rest of its tree",
                child,
                extra=child.log_fields,
            )
            await self.stop(child, grace_s=LEFTOVER_GRACE_S)
            child.read_remains()  # what that process wrote before it was ended
            try:
                await asyncio.wait_for(asyncio.shield(child.drained), KILL_WAIT_S)
            except TimeoutError:
                # Something unkillable (D state) still holds a pipe: stop reading it.
                logger.error(
                    "%r: its pipes stay open after the tree was ended",
                    child,
                    extra=child.log_fields,
                )
                child.stop_reading()
        returncode = child.returncode
        assert returncode is not None  # set when the exit was reported, before `exited`
        if child.group is not None and not finished:
            await self._finish_group(child, child.group)
        del self._started[child.pid]
        if self.guardian is not None:
            self.guardian.child_ended(child)
        child.close()
        return ProcessExit.from_returncode(returncode)

    async def _end_leftovers(self, child: Child) -> bool:
        """End what is left of the child's tree after it exited, with `LEFTOVER_GRACE_S`.

        True when the child's cgroup was empty: its usage is taken and it is removed
        already (`_finish_group` has nothing left to do).
        """
        if child.group is not None:
            # The usual case: the tree went with the child. Removing the cgroup is
            # what tells it (the kernel refuses while a process is inside), so no
            # read of its members comes first: one file read fewer before the
            # run's end is answered. Its usage must be read while it exists.
            self._take_usage(child, child.group)
            if child.group.remove():
                return True
        await self.stop(child, grace_s=LEFTOVER_GRACE_S)
        return False

    async def _finish_group(self, child: Child, group: Group) -> None:
        """Take the tree's CPU time and peak memory from its cgroup, then remove the cgroup."""
        self._take_usage(child, group)
        if not await _remove_when_empty(group):
            logger.error(
                "%r: its cgroup %s still has processes", child, group.path, extra=child.log_fields
            )

    def _take_usage(self, child: Child, group: Group) -> None:
        """The tree's CPU time and peak memory, from its cgroup (the largest reading wins)."""
        own = child.usage.cpu_seconds if child.usage is not None else 0.0
        # No memory controller (a hybrid host's is v1): no memory.peak to look for.
        hierarchy = self.tracking.hierarchy
        peak = group.memory_peak() if hierarchy is not None and hierarchy.memory else None
        child.usage = TreeUsage(
            cpu_seconds=max(group.cpu_seconds() or 0.0, own), rss_bytes=peak or 0, processes=1
        )

    async def stop(self, child: Child, grace_s: float) -> TreeStopReport:
        """End the child's whole tree: SIGTERM, up to `grace_s` seconds, then SIGKILL."""
        members = await asyncio.to_thread(self._snapshot, child)
        stragglers: list[Member] = []
        # After the child's own exit, what is signalled is what it left behind.
        tree = "what it left" if child.has_exited() else "its tree"
        report: TreeStopReport | None = None  # None if it raised
        try:
            if not members and child.has_exited():
                report = TreeStopReport(StopStep.NOTHING_LEFT, 0)
                return report
            signalled = _signal_tree(child, members, signal.SIGTERM)
            _tell(
                child, "SIGTERM sent to %s (%s); grace %.3f s", tree, _processes(signalled), grace_s
            )
            if await _wait_exited(child, members, grace_s) and not _has_members(child):
                report = TreeStopReport(StopStep.SIGTERM, signalled)
                return report
            stragglers = await asyncio.to_thread(self._snapshot, child)
            _tell(
                child,
                "grace of %.3f s elapsed: %s left",
                grace_s,
                _processes(len(stragglers) + int(not child.has_exited())),
            )
            killed = _signal_tree(child, stragglers, signal.SIGKILL)
            if child.group is not None:
                child.group.kill()  # also whatever forked since the snapshot
            _tell(child, "SIGKILL sent to %s (%s)", tree, _processes(killed))
            if not await _wait_exited(child, stragglers, KILL_WAIT_S):
                logger.error(
                    "%r: processes survived SIGKILL for %.0f s",
                    child,
                    KILL_WAIT_S,
                    extra=child.log_fields,
                )
            report = TreeStopReport(StopStep.SIGKILL, signalled)
            return report
        finally:
            ended = len({member.pid for member in (*members, *stragglers)})
            child.leftovers_ended += ended
            if report is not None and report.step is not StopStep.NOTHING_LEFT:
                _tell(
                    child,
                    "stop done at %s: %s besides the child ended",
                    report.step.value,
                    _processes(ended),
                )
            for member in (*members, *stragglers):
                member.close()
            with self._claiming:
                for pid in [pid for pid, owner in self._claimed.items() if owner is child]:
                    del self._claimed[pid]
            self.reap_exited()

    async def end_strays(
        self, markers: frozenset[str], recorded: list[tuple[int, float | None]], grace_s: float
    ) -> int:
        """End processes left by runs of a server that died; return how many were signalled.

        Only processes that carry one of `markers` (their run's id) in their
        environment are touched: a recorded pid counts only if its start time
        matches too, and then its descendants with it. Never a pid alone.
        """
        members = await asyncio.to_thread(_find_strays, markers, recorded)
        try:
            await self._term_then_kill(members, grace_s, [], markers)
            return len(members)
        finally:
            for member in members:
                member.close()
            self.reap_exited()

    async def sweep_gone_instances(self, grace_s: float) -> int:
        """End and remove what servers that are gone left in their cgroups; return how many.

        Any server on this host does it at start, whichever state directory the
        gone one used: the cgroup names and locks say whose they are and whether
        they are gone (cgroups.py). Every cgroup below an instance is read, ended
        (`cgroup.kill` is recursive) and removed, deepest first, within one bound.
        """
        hierarchy = self.tracking.hierarchy
        if hierarchy is None:
            return 0
        gone = await asyncio.to_thread(hierarchy.gone_instances)
        groups = [instance.group for instance in gone]
        members = await asyncio.to_thread(
            lambda: [member for group in groups for member in _pin_group(group, None)]
        )
        handed = False
        try:
            try:
                await self._term_then_kill(members, grace_s, groups)
            except SweepHandedOver:
                handed = True
                raise
            left = await _remove_all_when_empty(groups)
            for group in left:
                logger.error("cgroup %s of a gone server still has processes", group.path)
            if members:
                logger.warning(
                    "ended %s left in the cgroups of gone servers", _processes(len(members))
                )
            return len(members)
        finally:
            for member in members:
                member.close()
            if handed:
                self._handed += gone  # the guardian removes them: held until this server ends
            else:
                for instance in gone:
                    instance.release()  # once removed: no server can take it for alive meanwhile
            self.reap_exited()

    async def _term_then_kill(
        self,
        members: list[Member],
        grace_s: float,
        groups: list[Group],
        markers: frozenset[str] = frozenset(),
    ) -> None:
        """SIGTERM every member, wait up to the grace, then SIGKILL them and the `groups`.

        Once the server is leaving (`hand_over_sweeps`), the rest goes to the guardian
        (the members left, the `groups`, the `markers` a fork since carries) with the
        grace left, and `SweepHandedOver` is raised.
        """
        if not members and not any(group.pids() for group in groups):
            return
        loop = asyncio.get_running_loop()
        kill_at = loop.time() + grace_s
        for member in members:
            member.send_signal(signal.SIGTERM)
        exited = await _wait_exited_or(self._leaving, members, grace_s)
        if not exited and self._leaving.is_set() and loop.time() < kill_at:
            handed = _still_running(members)
            left = SweepLeft(
                cgroups=tuple(str(group.path) for group in groups),
                pids=tuple((member.pid, ticks) for member, ticks in handed),
                markers=tuple(sorted(markers)),
                kill_at=kill_at,
            )
            if self.guardian is not None and self.guardian.hand_over(left):
                raise SweepHandedOver(len(handed), kill_at - loop.time())
            exited = await _wait_exited(None, members, max(0.0, kill_at - loop.time()))
        if exited and not any(group.pids() for group in groups):
            return
        for member in members:
            member.send_signal(signal.SIGKILL)
        for group in groups:
            group.kill()
        if not await _wait_exited(None, members, KILL_WAIT_S):
            logger.error("leftover processes survived SIGKILL for %.0f s", KILL_WAIT_S)

    def _snapshot(self, child: Child) -> list[Member]:
        """Every live process of the child's tree but the child itself, each pinned by a pidfd.

        Cgroup mode: the members of its cgroup. Otherwise its descendants, the
        orphans carrying its run marker (adopted ones, or in marker mode any
        process), their descendants, and with a subreaper every adopted process
        no live child claims. Runs in a worker thread.
        """
        if child.group is not None:
            return _pin_group(child.group, child)
        found: dict[int, psutil.Process] = {}
        if child.pid_is_ours():
            with contextlib.suppress(psutil.Error):
                descendants = psutil.Process(child.pid).children(recursive=True)
                if child.pid_is_ours():  # still: these are the descendants of our child
                    found.update((process.pid, process) for process in descendants)
        live = {c.marker for c in self._started.values() if c is not child and not c.has_exited()}
        # Another live child of the same run carries the same marker: its orphans
        # are told apart from this one's only once the run's last child ends.
        by_marker = bool(child.marker) and child.marker not in live
        if self.tracking.is_subreaper:
            for process in self._adopted():
                marker = _marker_of(process)
                if (by_marker and marker == child.marker) or marker not in live:
                    found.setdefault(process.pid, process)
        elif by_marker:
            for process in psutil.process_iter():
                if process.pid != os.getpid() and _marker_of(process) == child.marker:
                    found.setdefault(process.pid, process)
        for process in list(found.values()):
            with contextlib.suppress(psutil.Error):
                for below in process.children(recursive=True):
                    found.setdefault(below.pid, below)
        if child.pid_is_ours():
            found.pop(child.pid, None)
        with self._claiming:
            for pid in list(found):
                if self._claimed.setdefault(pid, child) is not child:
                    del found[pid]  # another child's stop sequence is ending it
        members = [Member.pin(process) for process in found.values()]
        return [member for member in members if member is not None]

    async def sample(self, children: list[Child], *, trees: bool) -> dict[int, TreeUsage]:
        """Measure each child (with `trees`, its whole tree), by child pid. Off the loop.

        One call walks /proc once for all children: the cost of sampling does
        not grow with the number of children. A child in a cgroup is measured
        over its cgroup's processes, escapers included.
        """
        return await asyncio.to_thread(self._sample_now, children, trees)

    def _sample_now(self, children: list[Child], trees: bool) -> dict[int, TreeUsage]:
        below: dict[int, list[int]] = {}
        if trees and any(child.group is None for child in children):
            for process in psutil.process_iter(["ppid"]):
                below.setdefault(process.info["ppid"], []).append(process.pid)
        usages: dict[int, TreeUsage] = {}
        for child in children:
            members = [child.pid]
            if trees and child.group is not None:
                members += [pid for pid in child.group.pids() if pid != child.pid]
            else:
                for pid in members:  # grows as it goes: a breadth-first walk of the tree
                    members.extend(below.get(pid, ()))
            cpu, rss, count = 0.0, 0, 0
            for pid in members:
                if not child.pid_is_ours():
                    break  # reaped meanwhile: the pid may be someone else's now
                with contextlib.suppress(psutil.Error):
                    process = psutil.Process(pid)
                    with process.oneshot():
                        times = process.cpu_times()
                        cpu += times.user + times.system
                        rss += process.memory_info().rss
                    count += 1
            if count and child.pid_is_ours():
                usages[child.pid] = TreeUsage(cpu_seconds=cpu, rss_bytes=rss, processes=count)
        return usages

    def _adopted(self) -> list[psutil.Process]:
        """Our own children that we did not start (nor the guardian): orphans reparented to us."""
        try:
            # Listed first, then told apart: a guardian listed was started before.
            listed = psutil.Process().children()
            guardian = self.guardian
            return [
                p
                for p in listed
                if p.pid not in self._started and not (guardian and guardian.owns(p.pid))
            ]
        except psutil.Error:
            return []


def _tell(child: Child, message: str, *args: object) -> None:
    """One step of a stop sequence, at INFO: with the run's lines (runs/story.py),
    `--log-level info` tells what ended a run's processes, and how."""
    if logger.isEnabledFor(logging.INFO):
        logger.info("%r: " + message, child, *args, extra=child.log_fields)


def _processes(count: int) -> str:
    return plural(count, "process", "processes")


def _has_members(child: Child) -> bool:
    """True if the child's cgroup still holds a process other than the child."""
    if child.group is None:
        return False
    return any(pid != child.pid for pid in child.group.pids())


def _pin_group(group: Group, child: Child | None) -> list[Member]:
    """The processes in `group` (but `child`), pinned; a pid is kept only if still a member
    once its pidfd is open, so a pid recycled in between is never taken."""
    pinned = []
    for pid in group.pids():
        if child is not None and pid == child.pid and child.pid_is_ours():
            continue  # the child itself is signalled through its own pidfd
        member = Member.pin_pid(pid)
        if member is not None:
            pinned.append(member)
    still = set(group.pids())
    kept = [member for member in pinned if member.pid in still]
    for member in pinned:
        if member.pid not in still:
            member.close()
    return kept


async def _wait_exited_or(leaving: asyncio.Event, members: list[Member], timeout_s: float) -> bool:
    """`_wait_exited` for the members, cut short when `leaving` is set: True if all exited."""
    exited = asyncio.ensure_future(_wait_exited(None, members, timeout_s))
    told = asyncio.ensure_future(leaving.wait())
    try:
        await asyncio.wait({exited, told}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in (exited, told):
            waiting.cancel()
        await asyncio.gather(exited, told, return_exceptions=True)
    return not exited.cancelled() and exited.result()


def _still_running(members: list[Member]) -> list[tuple[Member, int]]:
    """The members not exited yet, each with its start time (read while it runs, so the
    pid was still its own)."""
    running = []
    for member in members:
        ticks = cgroups.start_ticks(member.pid)
        if ticks is not None and not member.has_exited():
            running.append((member, ticks))
    return running


async def _remove_all_when_empty(groups: list[Group]) -> list[Group]:
    """Remove every cgroup once empty, all within one KILL_WAIT_S; return those left."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + KILL_WAIT_S
    left = list(groups)
    while left := [group for group in left if not group.remove()]:
        if loop.time() > deadline:
            break
        await asyncio.sleep(EMPTY_CHECK_S)  # no event says a cgroup became empty
    return left


async def _remove_when_empty(group: Group) -> bool:
    """Remove the cgroup once its last process is gone (killed ones take a moment)."""
    return not await _remove_all_when_empty([group])


def _signal_tree(child: Child, members: list[Member], signum: int) -> int:
    """Signal the direct child, its group, then every member (some left the group).

    The group is signalled only while it verifiably exists (a pinned member still
    carries its id), so a recycled group id is never hit.
    """
    count = int(child.end_with(signum))
    if any(member.pgid == child.pgid for member in members):
        # Group first: killpg also reaches members forked since the snapshot.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pgid, signum)
    return count + sum(member.send_signal(signum) for member in members)


async def _wait_exited(child: Child | None, members: list[Member], timeout_s: float) -> bool:
    """Wait up to `timeout_s` for the direct child and every member to have exited.

    A pidfd becomes readable when its process exits, so this is event-driven
    for every process, ours or not.
    """
    loop = asyncio.get_running_loop()
    waits: list[asyncio.Future[object]] = []
    if child is not None:
        waits.append(asyncio.ensure_future(_exited(child)))
    watched: list[int] = []
    for member in members:
        if member.pidfd is None:
            continue
        exited: asyncio.Future[object] = loop.create_future()
        loop.add_reader(member.pidfd, _set_once, exited)
        watched.append(member.pidfd)
        waits.append(exited)
    if not waits:
        return True
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

    @classmethod
    def pin_pid(cls, pid: int) -> Member | None:
        """Open a pidfd on `pid` (the caller checks it still names the process it meant)."""
        pidfd = _open_pidfd(pid)
        if pidfd is None:
            return None
        try:
            return cls(pid=pid, pgid=os.getpgid(pid), pidfd=pidfd)
        except ProcessLookupError:
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

    def has_exited(self) -> bool:
        """True once the process has exited (its pidfd is readable), or is no longer pinned."""
        if self.pidfd is None:
            return True
        return bool(select.select([self.pidfd], [], [], 0)[0])

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _marker_of(process: psutil.Process) -> str | None:
    """The run marker in the process's initial environment (None: none, or unreadable)."""
    try:
        return process.environ().get(RUN_MARKER)
    except psutil.Error:
        return None


def _find_strays(markers: frozenset[str], recorded: list[tuple[int, float | None]]) -> list[Member]:
    """Processes carrying one of `markers`, each pinned (a worker thread's job)."""
    found: dict[int, psutil.Process] = {}
    for pid, create_time in recorded:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if create_time is None or abs(process.create_time() - create_time) > START_TOLERANCE_S:
                continue  # the pid names another process now
            if process.environ().get(RUN_MARKER) not in markers:
                continue
            found[pid] = process
            for below in process.children(recursive=True):
                found.setdefault(below.pid, below)
    for process in psutil.process_iter():
        if process.pid not in found and process.pid != os.getpid():
            with contextlib.suppress(psutil.Error):
                if process.environ().get(RUN_MARKER) in markers:
                    found[process.pid] = process
    members = [Member.pin(process) for process in found.values()]
    return [member for member in members if member is not None]


def _unexecutable(exc: ValueError) -> str:
    """Why `exec` cannot take the argv or environment, without echoing the bad text."""
    if isinstance(exc, UnicodeError):
        return "an argument or environment value is not valid UTF-8 text"
    if "null" in str(exc):
        return "an argument or environment value contains a NUL character"
    return f"invalid argument or environment ({exc})"
