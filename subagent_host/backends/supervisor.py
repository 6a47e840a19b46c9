"""Start, watch and end child process trees: the only code that spawns, signals and reaps.

Callers (the run scheduler) hand over a `LaunchSpec` and an `OutputSink`; the
supervisor starts the child in its own session, drains stdout and stderr
concurrently into the sink, reports how it exited, and on request ends the
whole tree with the stop sequence of RELIABILITY.md ("Killing a process tree").

It is the coordinator; each of its jobs has its own module:

- child.py: one started child (`Child`), its pidfd and its reaping;
- termination.py: the stop sequence (`Member` pinning, SIGTERM, grace, SIGKILL);
- trees.py: what a child's tree is (tracking.py: its cgroup, or its descendants
  plus the orphans carrying its run marker, `RUN_MARKER`) and what it uses;
- sweeps.py: ending what servers that died left, and handing that to the guardian;
- pipes.py, cgroups.py, tracking.py, lifeline.py: pipes, cgroups, the tracking
  mode, the guardian.

When the direct child exits, whatever is left of its tree is ended the same
way, with `LEFTOVER_GRACE_S`, before `wait` returns: no run is reported ended
while a process it started lives on. Scans of the process table run in a
worker thread; the loop only ever reads small /proc or cgroup files.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import subprocess
from collections.abc import Mapping
from typing import Final, Protocol

import attrs

from subagent_host.backends import cgroups, pipes, programs, termination
from subagent_host.backends.cgroups import Group, entering
from subagent_host.backends.child import Child, TreeUsage, open_pidfd
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.lifeline import Guardian, GuardianLog, GuardianSlot
from subagent_host.backends.sweeps import SweepHandedOver, Sweeps
from subagent_host.backends.termination import (
    KILL_WAIT_S,
    Member,
    StopStep,
    TreeStopReport,
    child_exited,
    remove_when_empty,
)
from subagent_host.backends.tracking import Tracking, TrackingMode, choose
from subagent_host.backends.trees import RUN_MARKER, Claims, sample_now, snapshot
from subagent_host.values.placement import Placement

# Names callers take from here, though their own modules hold them.
__all__ = [
    "DRAIN_AFTER_EXIT_S",
    "KILL_WAIT_S",
    "LEFTOVER_GRACE_S",
    "RUN_MARKER",
    "Child",
    "LaunchSpec",
    "OutputSink",
    "StopStep",
    "Supervisor",
    "SweepHandedOver",
    "TreeStopReport",
    "TreeUsage",
]

logger = logging.getLogger(__name__)

# Once the direct child has exited, a grandchild may still hold its pipes open
# (`sh -c "sleep 30 & echo done"`); waiting for EOF longer than this would hang
# the run, so the rest of the tree is ended instead.
DRAIN_AFTER_EXIT_S: Final = 2.0
# Processes still alive once the direct child has exited (or its final event
# was printed) get this long to go on SIGTERM before SIGKILL: the child's own
# work is over, so this is short, and a child that left nothing waits for none.
LEFTOVER_GRACE_S: Final = 0.5
# How often the server tries to leave a child's cgroup it stepped into to fork the child.
HOME_ATTEMPTS: Final = 3


@attrs.frozen
class LaunchSpec:
    """What to execute: everything is already resolved and checked by the caller."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    """The child's whole environment (allowlisted by the caller), including the marker."""
    stdin: bytes | None = None
    """Written to the child's stdin, which is then closed (it is closed in any case)."""
    placement: Placement | None = None
    """Where on a cluster it may run (protocol.md §8.8), for a cluster executor; the
    supervisor runs everything here and never gets one."""
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


class Supervisor:
    """Starts children, drains them, and ends their trees. One per server."""

    def __init__(self, tracking: Tracking | None = None) -> None:
        self.tracking = tracking if tracking is not None else choose()
        # Children we started, by pid, until `wait` is done with them. Every other
        # child of ours is an adopted orphan. A child is registered in the same
        # synchronous step that forks it, so no sweep can mistake it for one.
        self._started: dict[int, Child] = {}
        self.reaped = asyncio.Event()  # set whenever an adopted orphan was reaped
        self._claims = Claims()
        """Processes a stop sequence is ending, and for which child."""
        self._guardian = GuardianSlot()
        """Ends every child's tree if this server dies (`guard`); None: nothing does."""
        self._sweeps = Sweeps(self._guardian)

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
        guardian = Guardian(instance.path if instance is not None else None, log)
        self._guardian.current = guardian
        guardian.start()
        for child in self._started.values():
            guardian.child_started(child, child.pid, child.marker)

    def close(self) -> None:
        """Remove this server's cgroups: call once every child has been waited for."""
        if self.guardian is not None:
            self.guardian.close()
        self.tracking.close()
        self._sweeps.release_handed()

    async def aclose(self) -> None:
        """`close`, and wait (bounded) for the guardian to be gone (unless it finishes a
        sweep handed over: `hand_over_sweeps`)."""
        if self.guardian is not None:
            await self.guardian.aclose()
        self.tracking.close()
        self._sweeps.release_handed()

    def hand_over_sweeps(self) -> bool:
        """The server is leaving: a sweep of gone servers' leftovers (`sweep_gone_instances`,
        `end_strays`) hands what it still ends to the guardian once it has sent SIGTERM,
        instead of waiting out their grace here, and raises `SweepHandedOver`. False, and
        nothing changes (the sweep is waited for), when no guardian listens to take it.
        """
        return self._sweeps.hand_over()

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
        pidfd = open_pidfd(popen.pid)
        child = Child(loop, popen, pidfd, spec.env.get(RUN_MARKER, ""), group, spec.log_fields)
        self._started[child.pid] = child
        if self.guardian is not None:
            self.guardian.child_started(child, child.pid, child.marker)
        for fd in (stdout_read, stderr_read):
            pipes.enlarge(fd)
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
        await child_exited(child)
        if child.input is not None:
            child.input.close()  # kept open for a child that read it (`keep_stdin`): it is gone
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
        if not await remove_when_empty(group):
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
        try:
            return await termination.stop_tree(child, grace_s, self._snapshot)
        finally:
            self._claims.release(child)
            self.reap_exited()

    async def end_descendants(
        self, child: Child, grace_s: float, since_ticks: int | None = None
    ) -> int:
        """End what the running child left running (its tree but itself; with
        `since_ticks`, only what started since then): an interactive agent whose
        interrupted turn left a command going. How many were ended."""
        try:
            return await termination.end_descendants(child, grace_s, self._snapshot, since_ticks)
        finally:
            self._claims.release(child)
            self.reap_exited()

    async def end_strays(
        self, markers: frozenset[str], recorded: list[tuple[int, float | None]], grace_s: float
    ) -> int:
        """End processes left by runs of a server that died; return how many were signalled.

        Only processes that carry one of `markers` (their run's id) in their
        environment are touched: a recorded pid counts only if its start time
        matches too, and then its descendants with it. Never a pid alone.
        """
        try:
            return await self._sweeps.end_strays(markers, recorded, grace_s)
        finally:
            self.reap_exited()

    async def sweep_gone_instances(self, grace_s: float) -> int:
        """End and remove what servers that are gone left in their cgroups; return how many.

        Any server on this host does it at start, whichever state directory the
        gone one used: the cgroup names and locks say whose they are and whether
        they are gone (cgroups.py). Every cgroup below an instance is read, ended
        (`cgroup.kill` is recursive) and removed, deepest first, within one bound.
        """
        try:
            return await self._sweeps.sweep_gone_instances(self.tracking.hierarchy, grace_s)
        finally:
            self.reap_exited()

    def _snapshot(self, child: Child) -> list[Member]:
        """Every live process of the child's tree but the child itself, pinned (trees.py).
        Runs in a worker thread."""
        return snapshot(
            child, self._started, self.tracking.is_subreaper, self._guardian, self._claims
        )

    @property
    def guardian(self) -> Guardian | None:
        """The server's guardian, once `guard` started it."""
        return self._guardian.current

    async def sample(self, children: list[Child], *, trees: bool) -> dict[int, TreeUsage]:
        """Measure each child (with `trees`, its whole tree), by child pid. Off the loop.

        One call walks /proc once for all children: the cost of sampling does
        not grow with the number of children. A child in a cgroup is measured
        over its cgroup's processes, escapers included.
        """
        return await asyncio.to_thread(sample_now, children, trees)


def _unexecutable(exc: ValueError) -> str:
    """Why `exec` cannot take the argv or environment, without echoing the bad text."""
    if isinstance(exc, UnicodeError):
        return "an argument or environment value is not valid UTF-8 text"
    if "null" in str(exc):
        return "an argument or environment value contains a NUL character"
    return f"invalid argument or environment ({exc})"
