"""The server's end of its guardian's lifeline: the runs share the server's fate.

A server killed outright (SIGKILL, the OOM killer) cannot end its children. The
guardian (guardian.py), a small process of its own started here, holds the read
end of a pipe whose write end only the server holds; the server tells it over
that pipe which children it has (pid, run marker) and its instance cgroup. When
the pipe ends without a `bye`, the server is gone, and the guardian ends every
process of every run: SIGTERM, a short grace, SIGKILL (protocol.md §8.3).

The guardian is started without waiting for it (its own interpreter starts in
parallel), in a new session, from the server's own cgroup (never a child's), with
the write end close-on-exec so no child ever holds it. Should the guardian die on
its own, its pidfd says so: it is reaped, and another is started and told the
children alive then (and a sweep handed over, below).

A server leaving while it still ends what gone servers left (store/recovery.py)
hands the rest of that sweep to the guardian (`hand_over`): what it sent SIGTERM and
how much of their grace is left. The guardian finishes it after the `bye`, and the
server exits without waiting for it. A guardian that stops reading (its pipe's backlog grows past
`MAX_BACKLOG_BYTES`) is killed and replaced the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Final

import attrs

from subagent_host.backends import cgroups, pipes

logger = logging.getLogger(__name__)

PROGRAM: Final = str(Path(__file__).with_name("guardian.py"))
# A guardian that died this soon after its start is replaced after this pause, not
# at once: one that cannot run at all must not be restarted in a tight loop.
QUICK_DEATH_S: Final = 1.0
RESTART_PAUSE_S: Final = 1.0
# What may wait for the guardian to read: far more than the children of any server
# (a line is ~80 bytes); beyond it the guardian is taken to be stuck, and replaced.
MAX_BACKLOG_BYTES: Final = 4 * 1024 * 1024
# After the `bye`, the guardian exits at once; this bounds the wait for it.
EXIT_WAIT_S: Final = 5.0


@attrs.frozen
class SweepLeft:
    """What a sweep of gone servers' leftovers still ends, for the guardian to finish."""

    cgroups: tuple[str, ...]
    """The gone instances' cgroups being swept (everything below them goes too)."""
    pids: tuple[tuple[int, int], ...]
    """Each process sent SIGTERM and still running: its pid and start time (clock ticks)."""
    markers: tuple[str, ...]
    """The run markers of the processes ended outside any cgroup (forks since carry them)."""
    kill_at: float
    """When their grace ends, in the loop's time: then SIGKILL."""


@attrs.frozen
class GuardianLog:
    """Where the guardian writes its line when it ends a dead server's runs."""

    fd: int | None
    """The server's log (its stderr or its log file); None: nowhere."""
    json: bool = False
    """The server's log is JSON lines (`--log-format json`)."""


@attrs.define
class GuardianSlot:
    """Where the server's guardian is once started (None before `Supervisor.guard`).

    Shared with the code that needs the guardian while it works (finding a child's
    tree, handing a sweep over), which reads `current` at the moment it needs it:
    an attribute, not a call back into the supervisor.
    """

    current: Guardian | None = None


class Guardian:
    """Starts the guardian, keeps it told, replaces it if it dies, says bye at the end."""

    def __init__(self, instance: Path | None, log: GuardianLog) -> None:
        self._instance = instance
        self._log = log
        me = os.getpid()
        self._server = (str(me), str(cgroups.start_ticks(me)))
        """This server, as the guardian checks it: its pid and start time."""
        self._keys = itertools.count(1)
        self._children: dict[object, tuple[int, int, str]] = {}
        """What every guardian must know, by the server's child: its key, pid and marker."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._pidfd: int | None = None
        self._lifeline: int | None = None
        self._backlog = bytearray()
        self._waiting_to_write = False
        self._started_at = 0.0
        self._gone: asyncio.Future[None] | None = None
        self._closing = False
        self._restart: asyncio.TimerHandle | None = None
        self._sweep: SweepLeft | None = None
        """A sweep handed over (`hand_over`): the guardian finishes it, unwaited for."""

    @property
    def pid(self) -> int | None:
        """The running guardian's pid (None: none runs now)."""
        return self._process.pid if self._process is not None else None

    @property
    def is_listening(self) -> bool:
        """True while a guardian runs and can still be told something (before `close`)."""
        return self._process is not None and self._lifeline is not None and not self._closing

    def start(self) -> None:
        """Start a guardian and tell it all it must know (on the loop; never waits for it)."""
        loop = self._loop = asyncio.get_running_loop()
        self._restart = None
        if self._closing or self._process is not None:
            return
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        try:
            pipes.enlarge(write_end)  # what it is told at its start fits in the pipe at once
            log_format = "off" if self._log.fd is None else "json" if self._log.json else "text"
            self._process = subprocess.Popen(  # noqa: ASYNC220 - a vfork and an exec, as a child's
                [sys.executable, "-I", "-S", PROGRAM, str(read_end), *self._server, log_format],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._log.fd if self._log.fd is not None else subprocess.DEVNULL,
                pass_fds=(read_end,),
                start_new_session=True,
            )
        except OSError as exc:
            os.close(write_end)
            logger.error("cannot start the guardian of this server's runs: %s", exc)
            self._restart = loop.call_later(RESTART_PAUSE_S, self.start)
            return
        finally:
            os.close(read_end)
        os.set_blocking(write_end, False)
        self._lifeline = write_end
        self._started_at = loop.time()
        self._gone = loop.create_future()
        try:
            self._pidfd = os.pidfd_open(self._process.pid)
        except OSError:  # no pidfds here: its exit is reaped at SIGCHLD (Supervisor.reap_exited)
            self._pidfd = None
        else:
            loop.add_reader(self._pidfd, self.reap)
        if self._instance is not None:
            self._send({"cgroup": str(self._instance)})
        for key, pid, marker in self._children.values():
            self._send({"child": key, "pid": pid, "marker": marker})
        if self._sweep is not None:
            self._send_sweep(self._sweep)

    def hand_over(self, sweep: SweepLeft) -> bool:
        """Leave the rest of a sweep of gone servers' leftovers to the guardian: after the
        `bye` it waits out their grace, SIGKILLs what is left and removes the cgroups, and
        this server's exit does not wait for it. False (nothing told): no guardian listens.
        """
        if not self.is_listening:
            return False
        self._sweep = sweep
        self._send_sweep(sweep)
        return True

    def _send_sweep(self, sweep: SweepLeft) -> None:
        assert self._loop is not None
        left = max(0.0, sweep.kill_at - self._loop.time())
        self._send(
            {
                "sweep": {
                    "cgroups": list(sweep.cgroups),
                    "pids": [list(pid) for pid in sweep.pids],
                    "markers": list(sweep.markers),
                    "grace_left_s": math.ceil(left * 1000) / 1000,  # never less
                }
            }
        )

    def child_started(self, child: object, pid: int, marker: str) -> None:
        """A child started: `pid` leads its process group; `marker` is its run's id."""
        key = next(self._keys)
        self._children[child] = (key, pid, marker)
        self._send({"child": key, "pid": pid, "marker": marker})

    def child_ended(self, child: object) -> None:
        """The child and its whole tree are gone: nothing of it is left to end."""
        known = self._children.pop(child, None)
        if known is not None:
            self._send({"ended": known[0]})

    def owns(self, pid: int) -> bool:
        """True if `pid` is the running guardian (a child of this server, not an orphan)."""
        return self._process is not None and self._process.pid == pid

    def reap(self) -> None:
        """Reap the guardian if it exited (its pidfd is readable), and start another."""
        process = self._process
        if process is None:
            return
        try:
            pid, status = os.waitpid(process.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: gone all the same
            pid, status = process.pid, 255 << 8
        if pid == 0:
            return  # not exited yet (a spurious wake-up)
        process.returncode = os.waitstatus_to_exitcode(status)  # its finaliser leaves it be
        self._forget()
        if self._closing:
            return
        assert self._loop is not None
        quick = self._loop.time() - self._started_at < QUICK_DEATH_S
        logger.warning(
            "the guardian of this server's runs (pid %d) exited (%s); starting another",
            process.pid,
            _how(process.returncode),
        )
        self._restart = self._loop.call_later(RESTART_PAUSE_S if quick else 0, self.start)

    async def aclose(self) -> None:
        """The server is leaving: close the lifeline (`close`); after a `bye`, wait (bounded)
        for the guardian to exit, and reap it. Without one it waits for this process to
        exit, then ends what is left. A guardian finishing a sweep handed over is not
        waited for: it outlives this process by the grace it gives."""
        waits = self._process is not None and not self._children and self._sweep is None
        gone = self._gone if waits else None
        self.close()
        if gone is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(gone), EXIT_WAIT_S)

    def close(self) -> None:
        """Say `bye` when every child has ended (the guardian then exits quietly), and close
        the lifeline: a guardian not told `bye` ends what is left once this process has
        exited, as after a crash."""
        self._closing = True
        if self._restart is not None:
            self._restart.cancel()
        if self._lifeline is not None:
            if not self._children:
                self._backlog += b'{"bye": true}\n'
            with contextlib.suppress(OSError):  # the last of it, if the pipe takes it now
                del self._backlog[: os.write(self._lifeline, self._backlog)]
        self._close_lifeline()

    def _send(self, message: dict[str, object]) -> None:
        if self._lifeline is None:
            return  # none runs now: the next one is told everything at its start
        self._backlog += json.dumps(message).encode() + b"\n"
        if len(self._backlog) > MAX_BACKLOG_BYTES:
            logger.warning("the guardian of this server's runs stopped reading; replacing it")
            self._kill()
        elif not self._waiting_to_write:
            self._write()

    def _write(self) -> None:
        """Write what the pipe takes now; the rest when it has room (never blocks)."""
        lifeline = self._lifeline
        assert lifeline is not None and self._loop is not None
        try:
            del self._backlog[: os.write(lifeline, self._backlog)]
        except BlockingIOError:
            pass
        except BrokenPipeError:  # it died: its exit starts another, told everything
            self._backlog.clear()
        if self._backlog and not self._waiting_to_write:
            self._loop.add_writer(lifeline, self._write)
            self._waiting_to_write = True
        elif not self._backlog and self._waiting_to_write:
            self._loop.remove_writer(lifeline)
            self._waiting_to_write = False

    def _kill(self) -> None:
        """End a guardian that stopped reading; its exit starts another."""
        with contextlib.suppress(ProcessLookupError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            elif self._process is not None:  # not reaped yet: its pid is still its own
                os.kill(self._process.pid, signal.SIGKILL)
        self._close_lifeline()

    def _close_lifeline(self) -> None:
        lifeline, self._lifeline = self._lifeline, None
        if lifeline is None:
            return
        if self._waiting_to_write:
            assert self._loop is not None
            self._loop.remove_writer(lifeline)
            self._waiting_to_write = False
        self._backlog.clear()
        os.close(lifeline)

    def _forget(self) -> None:
        """Drop the exited guardian: its pidfd and lifeline."""
        if self._pidfd is not None:
            assert self._loop is not None
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self._close_lifeline()
        self._process = None
        if self._gone is not None and not self._gone.done():
            self._gone.set_result(None)


def _how(returncode: int | None) -> str:
    """How a process exited, for a log line: `SIGKILL`, `status 1`."""
    if returncode is not None and returncode < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-returncode).name
    return f"status {returncode}"
