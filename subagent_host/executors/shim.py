"""The shim between a remote executor and one child: nothing the child starts outlives it.

Run as `python -m subagent_host.executors.shim LIFELINE_FD STATUS_FD` with the
child's stdin, stdout and stderr as its own. Pure stdlib, importing nothing of
ours and never Ray: it runs on every node, under a Ray worker that may die at
any moment, and must hold without it.

Why each step (measured with Ray 2.60, reference RAY.md): Ray SIGKILLs a
worker's *direct* children when the worker ends, but not their descendants,
so the shim double-forks (it is then nobody's direct child there and lives to
clean up), calls `setsid` (no signal to the worker's group reaches the tree),
and makes itself a child subreaper (every orphan of the tree is re-parented to
it, so a walk of its descendants finds them all, daemons included).

The two pipes, both inherited:
- the **lifeline** (caller -> shim): its first line is the launch as JSON
  (`{argv, cwd, env, graceS}`; the environment never appears in an argv);
  a later line `stop GRACE_S` asks for the stop sequence, `signal SIGNUM` sends a
  signal to the child's process group (the child leads one of its own, as a local
  child does: a Ctrl-C there never reaches the shim), and `end REQ GRACE_S AGE`
  ends the descendants of the shim other than the child that started at most AGE
  clock ticks ago (`-`: all of them) as a stop does, then reports `{"req",
  "ended"}` (how many there were); end of file means the caller is gone (its
  process died, whatever killed it) and ends the tree too.
- the **status** (shim -> caller): JSON lines. `{"pid", "shim"}` once the child
  runs, or `{"error", "errno"}` when it cannot start; then the `end` reports asked
  for, then `{"returncode", "stoppedBy", "leftovers", "cpuSeconds", "peakRssBytes",
  "processes"}` once nothing of the tree is left (`returncode` as `subprocess`
  spells it: negative for a signal). The caller takes the exit from here, not from waiting on the
  shim (which holds the child's pipes).

What the tree used comes with its exit. The shim is the subreaper, so every
descendant ends reaped by it or by one of its own reaped ancestors, and
`RUSAGE_CHILDREN` holds the CPU of the whole tree. Memory is the larger of that
usage's `ru_maxrss` (the largest single process, a fork's pages before its exec
included) and the largest sum of the tree's RSS a walk of it saw; `processes` is
the most processes (the child included) a walk saw at once. The shim walks the
tree soon after the start, then less and less often (every walk reads all of
/proc, and a node may hold many shims), and at every step of ending it.

Ending a tree is SIGTERM to every descendant, a grace, then SIGKILL to what is
left, reaping as they go; a child that exits by itself leaves its lingering
descendants to the same sequence (with its own grace, `graceS`).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, Final

PR_SET_CHILD_SUBREAPER: Final = 36
# How often the shim looks again while it waits for a tree to go (it reaps in between).
POLL_S: Final = 0.02
# After SIGKILL, how long the shim waits for the kernel to end the tree before it
# reports what is left (a process in uninterruptible sleep dies when it wakes).
KILL_WAIT_S: Final = 5.0
# The most a lifeline's first line (the launch) may hold.
MAX_SPEC_BYTES: Final = 16 * 1024 * 1024
STOPPED_BY_TERM: Final = "sigterm"
STOPPED_BY_KILL: Final = "sigkill"
# When the shim first walks the running tree to count it, and the longest it waits
# between two walks (the wait doubles from the first up to this).
FIRST_SAMPLE_S: Final = 0.1
LAST_SAMPLE_S: Final = 2.0
PAGE_BYTES: Final = os.sysconf("SC_PAGE_SIZE")


def main(argv: list[str]) -> None:
    """The shim's first process: fork the real shim and exit, so it is nobody's direct child."""
    lifeline, status = int(argv[1]), int(argv[2])
    if os.fork() != 0:
        os._exit(0)  # the caller reaps this one at once; the tree is the grandchild's
    try:
        code = _serve(lifeline, status)
    except BaseException:  # the shim itself failed: say so, and never run the caller's code
        code = 1
    os._exit(code)


def _serve(lifeline: int, status: int) -> int:
    os.setsid()
    _become_subreaper()
    # A Ray worker's threads block signals and the child would inherit the mask.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    reader = _Lines(lifeline)
    spec = json.loads(reader.first_line())
    child = _start(spec, lifeline, status)
    if child is None:
        return 0
    shim = os.getpid()
    _report(status, {"pid": child, "shim": shim})
    returncode, stopped_by = _wait_for_child(child, reader, status, float(spec.get("graceS", 5.0)))
    if stopped_by is None:
        # The child is done; what it left behind goes as a stopped tree would.
        leftovers = _end_tree(shim, float(spec.get("graceS", 5.0)))
    else:
        leftovers = 0
    _reap_any()  # descendants that ended by themselves: their usage counts once reaped
    ended = {"returncode": returncode, "stoppedBy": stopped_by, "leftovers": leftovers}
    _report(status, {**ended, **_seen.usage()})
    return 0


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def _start(spec: dict[str, Any], lifeline: int, status: int) -> int | None:
    """Fork and exec the child; its pid, or None once an `error` was reported."""
    argv = [str(arg) for arg in spec["argv"]]
    env = {str(key): str(value) for key, value in spec.get("env", {}).items()}
    failure_r, failure_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the child: nothing of the shim's but its stdio
        try:
            os.close(failure_r)
            os.close(lifeline)
            os.close(status)
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
                signal.signal(signum, signal.SIG_DFL)
            os.setpgid(0, 0)  # its own group, which `signal` reaches and the shim is not in
            os.chdir(spec.get("cwd") or "/")
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            os.write(failure_w, json.dumps([exc.errno or 0, str(exc)]).encode())
        finally:
            os._exit(127)
    os.close(failure_w)
    failure = _read_all(failure_r)
    if not failure:  # closed on exec: it runs
        return pid
    os.waitpid(pid, 0)
    number, message = json.loads(failure)
    _report(status, {"error": message, "errno": number})
    return None


def _wait_for_child(
    child: int, reader: _Lines, status: int, grace_s: float
) -> tuple[int, str | None]:
    """Wait for the child's exit, a stop request or the lifeline's end; reap meanwhile,
    and carry out the `signal` and `end` requests that come.

    Returns the child's returncode and, when the shim ended the tree, how.
    """
    pidfd = os.pidfd_open(child)
    wait_s = FIRST_SAMPLE_S
    try:
        while True:
            ready, _, _ = select.select([pidfd, reader.fd], [], [], wait_s)
            if not ready:  # time for a look at the tree (the walk records what it sees)
                _reap_any()
                _descendants(os.getpid())
                wait_s = min(wait_s * 2, LAST_SAMPLE_S)
                continue
            if pidfd in ready:
                return _reap(child), None
            command = reader.next_line()
            if command is None:  # the caller is gone
                return _stop(child, grace_s)
            word, _, value = command.partition(" ")
            if word == "stop":
                return _stop(child, float(value) if value else grace_s)
            if word == "signal":
                _signal_group(child, int(value))
            elif word == "end":
                req, grace, age = value.split()
                # Now, less the age: what the caller's clock said, in this node's ticks.
                since = None if age == "-" else _ticks_now() - int(age)
                ended = _end_descendants(child, float(grace), since)
                _report(status, {"req": int(req), "ended": ended})
    finally:
        os.close(pidfd)


def _stop(child: int, grace_s: float) -> tuple[int, str]:
    """End the whole tree (the stop sequence) and return the child's status and the step
    that ended it."""
    shim = os.getpid()
    stopped_by = STOPPED_BY_KILL if _end_tree(shim, grace_s, count_only=False) else STOPPED_BY_TERM
    return _reap(child), stopped_by


def _signal_group(child: int, signum: int) -> None:
    """`signum` to the child's group. Not reaped yet (only this loop reaps it), its pid
    is still its own, and so is the group's id."""
    try:
        os.killpg(child, signum)
    except (ProcessLookupError, PermissionError):  # its group is gone, or not its own
        pass


def _end_descendants(child: int, grace_s: float, since: int | None) -> int:
    """End what the running child left running (the shim's descendants but the child; with
    `since`, those started at or after it): the stop sequence, waited for here (`grace_s`,
    short: the loop answers no other request meanwhile). How many processes there were."""
    shim = os.getpid()

    def started_since() -> list[int]:
        found = (pid for pid in _descendants(shim) if pid != child)
        return [pid for pid in found if since is None or _start_ticks(pid) >= since]

    return _end(started_since, grace_s)[0]


def _end_tree(shim: int, grace_s: float, *, count_only: bool = True) -> int:
    """SIGTERM every descendant, wait up to `grace_s`, SIGKILL what is left, reap them all.

    Returns how many processes there were (`count_only`), else whether SIGKILL was needed.
    """
    found, killed = _end(lambda: _descendants(shim), grace_s)
    return found if count_only else int(killed)


def _end(members: Callable[[], list[int]], grace_s: float) -> tuple[int, bool]:
    """SIGTERM every process `members` finds, wait up to `grace_s`, SIGKILL what is left,
    reaping meanwhile; how many there were, and whether SIGKILL was needed."""
    found = members()
    if not found:
        return 0, False
    _signal_all(found, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = found
    while left and time.monotonic() < deadline:
        _reap_any()
        time.sleep(POLL_S)  # noqa: TID251 -- the shim has no loop; it reaps between looks
        left = members()
    killed = bool(left)
    deadline = time.monotonic() + KILL_WAIT_S
    while left and time.monotonic() < deadline:
        _signal_all(left, signal.SIGKILL)
        _reap_any()
        time.sleep(POLL_S)  # noqa: TID251 -- likewise
        left = members()
    _reap_any()
    return len(found), killed


def _signal_all(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:  # gone since the walk
            pass


class _Seen:
    """The most of the tree any walk of it saw: processes at once, and the sum of their RSS."""

    def __init__(self) -> None:
        self.processes = 1  # the child, however quickly it ended
        self.rss_bytes = 0

    def walked(self, rss_pages: Iterable[int]) -> None:
        pages = list(rss_pages)
        self.processes = max(self.processes, len(pages))
        self.rss_bytes = max(self.rss_bytes, sum(pages) * PAGE_BYTES)

    def usage(self) -> dict[str, Any]:
        """The tree's usage, once every process of it was reaped."""
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {
            "cpuSeconds": round(reaped.ru_utime + reaped.ru_stime, 3),
            "peakRssBytes": max(reaped.ru_maxrss * 1024, self.rss_bytes),
            "processes": self.processes,
        }


_seen = _Seen()
"""What the walks of the shim's tree saw (every `_descendants` is one)."""


def _descendants(root: int) -> list[int]:
    """Every live process below `root` (zombies, already dead, left out), from /proc."""
    children: dict[int, list[int]] = {}
    rss_pages: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:  # exited during the walk
            continue
        if fields[0] == b"Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss_pages[int(entry)] = int(fields[21])
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    _seen.walked(rss_pages.get(pid, 0) for pid in found)
    return found


def _ticks_now() -> int:
    """Now, in the clock ticks since boot that a process's start time counts in."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def _start_ticks(pid: int) -> int:
    """When `pid` started, in clock ticks since boot (field 22 of its stat); 0 once gone
    (nothing left to end)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return 0
    return int(fields[19])


def _reap(child: int) -> int:
    """Wait for the child and return its returncode (negative: the signal that ended it)."""
    while True:
        try:
            _, status = os.waitpid(child, 0)
        except ChildProcessError:  # reaped by `_reap_any` meanwhile
            return _reaped.pop(child, 0)
        except InterruptedError:
            continue
        return os.waitstatus_to_exitcode(status)


_reaped: dict[int, int] = {}
"""Returncodes of processes `_reap_any` reaped (the child may be one of them)."""


def _reap_any() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _reaped[pid] = os.waitstatus_to_exitcode(status)


def _report(status: int, message: dict[str, Any]) -> None:
    try:
        os.write(status, json.dumps(message).encode() + b"\n")
    except BrokenPipeError:  # the caller is gone; the tree is ended all the same
        pass


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


class _Lines:
    """Lines of the lifeline, read without buffering past what select reports."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""
        self._closed = False

    def first_line(self) -> str:
        while b"\n" not in self._buffer:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise EOFError("the lifeline ended before the launch")
            self._buffer += chunk
            if len(self._buffer) > MAX_SPEC_BYTES:
                raise ValueError("the launch is too large")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def next_line(self) -> str | None:
        """After select said readable: a whole line, "" for a partial one, None at EOF."""
        if b"\n" not in self._buffer and not self._closed:
            chunk = os.read(self.fd, 4096)
            if not chunk:
                self._closed = True
            self._buffer += chunk
        if b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            return line.decode()
        return None if self._closed else ""


if __name__ == "__main__":
    main(sys.argv)
