"""One started child process: its pid, pidfd, cgroup, pipes, and its reaping.

`Supervisor.start` (supervisor.py) makes it; the child is reaped here, the
moment its pidfd reports the exit, with `wait4` so its own resource usage
comes along. Without a pidfd (an old kernel) a thread waits for the exit and
hands the reaping to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import resource
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping

import attrs

from subagent_host.backends import pipes
from subagent_host.backends.cgroups import Group
from subagent_host.backends.exits import StoppedBy
from subagent_host.backends.liveness import process_create_time

# The supervisor's log lines keep one logger, whichever of its modules writes them.
logger = logging.getLogger("subagent_host.backends.supervisor")


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


def open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (ProcessLookupError, AttributeError, OSError):
        return None  # already exited (and reaped), or no pidfd support here
