"""The guardian: when its server dies, whatever killed it, the server's runs die with it.

Run by the server (lifeline.py) as `python -I -S guardian.py LIFELINE_FD SERVER_PID
SERVER_START_TICKS LOG_FORMAT`, in a session of its own (a terminal's Ctrl-C to the server's group
does not reach it) and outside every cgroup it may end. Pure standard library and
nothing of ours, run by path without `site`: it starts in a few milliseconds, in
parallel with the server, and never costs the server its own start.

The **lifeline** is a pipe whose write end only the server holds (close-on-exec:
no child inherits it). The server writes JSON lines on it:

- `{"cgroup": PATH}`: the server's instance cgroup (cgroup tracking): every
  cgroup below it is a child's;
- `{"child": KEY, "pid": PID, "marker": RUN_ID}`: a child started (it leads its
  own process group; `marker` is its `SUBAGENT_HOST_RUN_ID`, empty for a child of
  no run);
- `{"ended": KEY}`: that child and its whole tree are gone;
- `{"sweep": {"cgroups": [PATH, ...], "pids": [[PID, START_TICKS], ...], "markers":
  [RUN_ID, ...], "grace_left_s": SECONDS}}`: the server is leaving while it still ends
  what servers that are gone left (store/recovery.py), and hands that to the guardian:
  the gone instances' cgroups it sweeps, the processes it sent SIGTERM (each with its
  start time, field 22 of /proc/PID/stat), the run markers of the processes it ends
  outside any cgroup, and how much of their grace is left;
- `{"bye": true}`: the server is leaving cleanly, its children all ended.

The server's death (SIGKILL, the OOM killer, a crash) is told by a pidfd on it
(checked to be the server by its start time), and by the lifeline's end: a
copy of the write end leaked into a process that outlives the server would hold
the pipe open, the pidfd is not fooled. With no `bye` read when the server is
gone, the guardian sends SIGTERM to every process of every child it
knows of: the members of the children's cgroups, each child (recognised by its
start time, so a recycled pid is never hit), the members of its process group,
every process carrying one of the children's markers, and everything below
those. It waits up to `DEAD_SERVER_GRACE_S` for them to go, sends SIGKILL to
whatever is left (and `cgroup.kill` to the cgroups), removes the emptied
cgroups, writes one log line and exits. A dead server's runs get this short
grace, not their own: nobody is left to wait for them.

After a `sweep` the guardian outlives the server: once the `bye` is read (or the
server is gone), it waits out the grace left for the processes handed to it (no
longer if they all go before), takes the gone instances' locks once the server has
exited (cgroups.py: no other server sweeps them meanwhile), sends SIGKILL to what is
left of them (and whatever is in those cgroups, carries those markers, or is below
any of them; `cgroup.kill` to the cgroups), removes the emptied cgroups deepest
first, writes one log line and exits. The grace is the one the server gave: the
processes get no less of it than they would have had. On a log that is a pipe or
a socket, whose reader waits for its end (due when the server has exited), the line
is written at once, saying what is due, and the log is let go of.

Every process is signalled through a pidfd opened after it was found and checked
again (its start time) once open: a pid recycled between the two is never hit.
Processes the guardian signals are not its children: their parents, or init,
reap them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import stat
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, Final

RUN_MARKER: Final = b"SUBAGENT_HOST_RUN_ID="
LOGGER: Final = "subagent_host.backends.guardian"
# What a dead server's runs get between SIGTERM and SIGKILL (protocol.md §8.3).
DEAD_SERVER_GRACE_S: Final = 1.0
# After SIGKILL the kernel ends processes at once; this bounds the wait for one
# stuck in uninterruptible sleep (it dies when it wakes).
KILL_WAIT_S: Final = 5.0
# How often an emptied cgroup is tried for removal (no event says it became empty).
EMPTY_CHECK_S: Final = 0.01
READ_BYTES: Final = 65536


class Known:
    """What the server told: its instance cgroup and its live children."""

    def __init__(self, server: int) -> None:
        self.server = server
        self.instance: str | None = None
        self.children: dict[int, tuple[int, int | None, str]] = {}
        """By the server's key: the child's pid, its start time as read here (None: it
        was not the child any more when read), and its run marker."""
        self.bye = False
        self.sweep: Sweep | None = None
        """What the leaving server handed over of its sweep of gone servers (`sweep`)."""
        self._partial = b""

    def feed(self, data: bytes) -> None:
        """Take the complete lines of `data` (with what came before it)."""
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            self.take(line)

    def take(self, line: bytes) -> None:
        """Apply one line of the lifeline (a line that does not parse is ignored)."""
        try:
            message = json.loads(line)
            if isinstance(message, dict):
                self._apply(message)
        except (ValueError, TypeError, KeyError, AttributeError):
            return

    def _apply(self, message: dict[str, Any]) -> None:
        if "cgroup" in message:
            self.instance = str(message["cgroup"])
        elif "child" in message:
            pid, marker = int(message["pid"]), str(message.get("marker", ""))
            self.children[int(message["child"])] = (
                pid,
                _child_ticks(pid, marker, self.server),
                marker,
            )
        elif "ended" in message:
            self.children.pop(int(message["ended"]), None)
        elif "sweep" in message:
            if self.sweep is None:
                self.sweep = Sweep()
            self.sweep.add(message["sweep"])
        elif message.get("bye"):
            self.bye = True

    @property
    def markers(self) -> frozenset[bytes]:
        return frozenset(marker.encode() for _, _, marker in self.children.values() if marker)

    def cgroups(self) -> list[str]:
        """Every child's cgroup (below the instance), deepest first, then the instance."""
        if self.instance is None:
            return []
        found = [path for path, _, _ in os.walk(self.instance, topdown=False)]
        return found if found else [self.instance]


class Sweep:
    """What the server was still ending of gone servers' leftovers when it left."""

    def __init__(self) -> None:
        self.cgroups: list[str] = []
        self.markers: set[bytes] = set()
        self.pinned: dict[int, int] = {}
        """By pid, a pidfd on each process handed over, opened as it was told."""
        self.deadline = 0.0
        """When their grace ends (time.monotonic)."""

    def add(self, sweep: dict[str, Any]) -> None:
        """Take one `sweep` message. Its processes are pinned at once, while the server
        (which sent them SIGTERM) still holds them pinned: a pid recycled since is skipped
        by its start time."""
        left = max(0.0, float(sweep["grace_left_s"]))
        cgroups = [str(path) for path in sweep.get("cgroups", ())]
        markers = {str(marker).encode() for marker in sweep.get("markers", ()) if marker}
        told = {int(pid): int(ticks) for pid, ticks in sweep.get("pids", ())}
        self.cgroups += cgroups
        self.markers |= markers
        self.pinned.update(_pin(told, skip=self.pinned))
        # Never sooner than the server said: a second message may only extend it.
        self.deadline = max(self.deadline, time.monotonic() + left)

    def groups(self) -> list[str]:
        """Every cgroup of the sweep and below, deepest first (the order of removal)."""
        return [path for group in self.cgroups for path, _, _ in os.walk(group, topdown=False)]


def _child_ticks(pid: int, marker: str, server: int) -> int | None:
    """The child's start time, once it is sure the pid still names the child: a process
    whose parent is the server (then it is the child, or a newer child of the server the
    server will tell of), or one carrying the child's run marker (its server gone, or a
    recycled pid of the same run). None: the pid names another process now."""
    stat = _stat(pid)
    if stat is None:
        return None
    if stat[0] == server or (marker and _marker(pid) == marker.encode()):
        return stat[3]
    return None


def main(argv: list[str]) -> int:
    lifeline, server, ticks, log_format = int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    known = Known(server)
    pidfd = _pin_server(server, ticks)
    watch(lifeline, pidfd, known)
    if not known.bye:  # else a clean exit: the server ended its runs itself
        runs = len(known.markers)
        termed, killed = end_runs(known)
        if termed or killed:
            then = (
                f"SIGKILL to the {killed} left after {DEAD_SERVER_GRACE_S:.1f} s"
                if killed
                else "none was left after it"
            )
            _log(
                log_format,
                "WARNING",
                f"server {server} died: SIGTERM sent to {_count(termed)} of its "
                f"{_count(runs, 'run')}; {then}",
            )
    if known.sweep is not None:
        finish_sweep(known.sweep, pidfd, server, log_format)
    return 0


def finish_sweep(sweep: Sweep, pidfd: int | None, server: int, log_format: str) -> None:
    """End what the server handed over of its sweep (`end_sweep`), and say so in one line:
    once it is done; on a pipe (or a socket), at once, before letting go of it."""
    said = f"server {server} handed over ending {_count(len(sweep.pinned))} left by gone servers"
    if _is_stream(2):
        # Its reader waits for its end, which is due when the server has exited, not
        # after the grace: the line is written now.
        left = max(0.0, sweep.deadline - time.monotonic())
        _log(log_format, "WARNING", f"{said}: SIGKILL to what is left in {left:.1f} s")
        _let_go_of_log()
        end_sweep(sweep, pidfd)
        return
    killed, stuck = end_sweep(sweep, pidfd)
    then = f"SIGKILL to the {killed} left after the grace" if killed else "none was left"
    if stuck:
        then += f"; cgroup {stuck[0]} still has processes"
    _log(log_format, "WARNING", f"{said}: {then}")


def watch(lifeline: int, server: int | None, known: Known) -> None:
    """Take what the lifeline says until a `bye`, or until the server is gone: its pidfd
    (`server`) readable, then the rest of the lifeline read. Without a pidfd, the
    lifeline's end alone tells. The lifeline's end while the server lives (it closed
    it, leaving with children still running) is not its death: that is waited for."""
    poller = select.poll()
    poller.register(lifeline, select.POLLIN)
    if server is not None:
        poller.register(server, select.POLLIN)
    while True:
        for fd, _ in poller.poll():
            if fd == server:
                _read_rest(lifeline, known)
                return
            data = os.read(lifeline, READ_BYTES)
            if data:
                known.feed(data)
                if known.bye:
                    return
                continue
            poller.unregister(lifeline)
            if server is None:
                return


def _pin_server(server: int, ticks: int) -> int | None:
    """A pidfd on the server, if it is still the process that started this guardian (its
    start time); None if it is gone already, or pidfds are unknown here."""
    try:
        pidfd = os.pidfd_open(server)
    except ProcessLookupError:
        return _closed_pidfd()
    except OSError:
        return None
    stat = _stat(server)
    if stat is None or stat[3] != ticks:
        os.close(pidfd)  # gone, and its pid another's now
        return _closed_pidfd()
    return pidfd


def _closed_pidfd() -> int:
    """A descriptor that is readable at once: the server is gone already."""
    read_end, write_end = os.pipe()
    os.close(write_end)
    return read_end


def _read_rest(lifeline: int, known: Known) -> None:
    """Take what the dead server wrote before it died (never waits: a copy of the write end
    that leaked into another process must not hold the guardian up)."""
    os.set_blocking(lifeline, False)
    with contextlib.suppress(BlockingIOError):
        while data := os.read(lifeline, READ_BYTES):
            known.feed(data)


def end_runs(known: Known) -> tuple[int, int]:
    """SIGTERM every process of the known children, the grace, SIGKILL what is left.

    Returns how many processes got SIGTERM, and how many SIGKILL.
    """
    groups = known.cgroups()
    first = _pin(_tree(known, groups))
    later: dict[int, int] = {}
    try:
        for pidfd in first.values():
            _send(pidfd, signal.SIGTERM)
        _wait_exited(first.values(), DEAD_SERVER_GRACE_S)
        left = {pid: pidfd for pid, pidfd in first.items() if not _has_exited(pidfd)}
        # Whatever else is there now: forked since the first look (no SIGTERM for it).
        later = _pin(_tree(known, groups), skip=left)
        left.update(later)
        for pidfd in left.values():
            _send(pidfd, signal.SIGKILL)
        for group in groups:
            _kill_cgroup(group)
        _wait_exited(left.values(), KILL_WAIT_S)
        _remove_cgroups(groups)
        return len(first), len(left)
    finally:
        for pidfd in (*first.values(), *later.values()):
            os.close(pidfd)


def end_sweep(sweep: Sweep, server: int | None) -> tuple[int, list[str]]:
    """Wait out the grace left, SIGKILL what is left of the sweep, remove its cgroups.

    `server` is the pidfd on the server (None: none here): its locks on the gone
    instances go with it, and are taken here then. Returns how many processes got
    SIGKILL, and the cgroups that could not be removed.
    """
    locks: list[int] = []
    later: dict[int, int] = {}
    try:
        locks = _wait_grace(sweep, server)
        groups = sweep.groups()
        left = {pid: pidfd for pid, pidfd in sweep.pinned.items() if not _has_exited(pidfd)}
        # Forked since the server's SIGTERM, or a member it had not seen: no grace of its own.
        found = _below(dict(_process_table()), groups, set(left), set(), sweep.markers)
        later = _pin(found, skip=left)
        for pidfd in (*left.values(), *later.values()):
            _send(pidfd, signal.SIGKILL)
        for group in groups:
            _kill_cgroup(group)
        _wait_exited((*left.values(), *later.values()), KILL_WAIT_S)
        return len(left) + len(later), _remove_cgroups(groups)
    finally:
        for fd in (*sweep.pinned.values(), *later.values(), *locks):
            os.close(fd)


def _wait_grace(sweep: Sweep, server: int | None) -> list[int]:
    """Wait until every process handed over has exited, at most until the deadline; take
    the gone instances' locks once the server is gone (it exits right after its `bye`),
    or at the end if it is not. Returns the locks taken."""
    locks: list[int] | None = None
    waiting = set(sweep.pinned.values())
    poller = select.poll()
    for pidfd in waiting:
        poller.register(pidfd, select.POLLIN)
    if server is not None:
        poller.register(server, select.POLLIN)
    while waiting:
        remaining = sweep.deadline - time.monotonic()
        if remaining <= 0:
            break
        for fd, _ in poller.poll(remaining * 1000):
            poller.unregister(fd)
            if fd == server:
                locks = _lock_all(sweep.cgroups)
            else:
                waiting.discard(fd)
    return locks if locks is not None else _lock_all(sweep.cgroups)


def _lock_all(instances: Iterable[str]) -> list[int]:
    """Take each gone instance's lock (cgroups.py): a server starting meanwhile takes it for
    alive and leaves it be. One another sweeper holds is ended all the same."""
    locks: list[int] = []
    for instance in instances:
        try:
            fd = os.open(instance, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        locks.append(fd)
    return locks


def _tree(known: Known, groups: Iterable[str]) -> dict[int, int]:
    """Every live process of the known children, with its start time (never this one)."""
    table = dict(_process_table())
    chosen: set[int] = set()
    led: set[int] = set()
    for pid, ticks, _ in known.children.values():
        if ticks is None:
            continue  # not found as the child: its pid (and group id) may be another's
        entry = table.get(pid)
        if entry is not None and entry[3] == ticks:
            chosen.add(pid)
        if entry is None or entry[3] == ticks:
            # The group outlives its leader, and its id is not reused while it does.
            led.add(pid)
    return _below(table, groups, chosen, led, known.markers)


def _below(
    table: dict[int, tuple[int, int, str, int]],
    groups: Iterable[str],
    chosen: set[int],
    led: set[int],
    markers: Iterable[bytes],
) -> dict[int, int]:
    """The `chosen` processes, the members of `groups`, of the process groups `led` and the
    carriers of `markers`, and everything below them, with their start times."""
    for group in groups:
        chosen.update(_cgroup_members(group))
    markers = frozenset(markers)
    for pid, (_, pgid, _, _) in table.items():
        if pgid in led or (markers and _marker(pid) in markers):
            chosen.add(pid)
    below: dict[int, list[int]] = {}
    for pid, (ppid, _, _, _) in table.items():
        below.setdefault(ppid, []).append(pid)
    todo = list(chosen)
    while todo:
        for pid in below.get(todo.pop(), ()):
            if pid not in chosen:
                chosen.add(pid)
                todo.append(pid)
    chosen.discard(os.getpid())
    return {pid: table[pid][3] for pid in chosen if pid in table}


def _process_table() -> Iterator[tuple[int, tuple[int, int, str, int]]]:
    """Every live (not zombie) process: pid -> (ppid, pgid, state, start ticks)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[2] != "Z":
                yield int(entry), stat


def _stat(pid: int) -> tuple[int, int, str, int] | None:
    """(ppid, pgid, state, start ticks) of `pid` from /proc/PID/stat; None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[2]), fields[0].decode(), int(fields[19])


def _marker(pid: int) -> bytes | None:
    """The run marker in the process's environment, None if it has none (or is gone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            for item in environ.read().split(b"\0"):
                if item.startswith(RUN_MARKER):
                    return item[len(RUN_MARKER) :]
    except OSError:
        pass
    return None


def _cgroup_members(group: str) -> list[int]:
    try:
        with open(os.path.join(group, "cgroup.procs"), "rb") as procs:
            return [int(pid) for pid in procs.read().split()]
    except OSError:
        return []


def _pin(found: dict[int, int], skip: Iterable[int] = ()) -> dict[int, int]:
    """A pidfd for each process found, kept only if its start time still matches."""
    pinned: dict[int, int] = {}
    skipped = set(skip)
    for pid, ticks in found.items():
        if pid in skipped:
            continue
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue  # gone already
        stat = _stat(pid)
        if stat is None or stat[3] != ticks:
            os.close(pidfd)  # the pid names another process now
            continue
        pinned[pid] = pidfd
    return pinned


def _send(pidfd: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(pidfd, signum)


def _has_exited(pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 0)[0])


def _wait_exited(pidfds: Iterable[int], timeout_s: float) -> None:
    """Wait up to `timeout_s` until every process has exited (a pidfd is readable then)."""
    waiting = set(pidfds)
    deadline = time.monotonic() + timeout_s
    poller = select.poll()
    for pidfd in waiting:
        poller.register(pidfd, select.POLLIN)
    while waiting:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        for pidfd, _ in poller.poll(remaining * 1000):
            poller.unregister(pidfd)
            waiting.discard(pidfd)


def _kill_cgroup(group: str) -> None:
    """SIGKILL every process of the cgroup and below, forks included (Linux 5.14+);
    one by one on an older kernel."""
    try:
        with open(os.path.join(group, "cgroup.kill"), "w") as kill:
            kill.write("1")
        return
    except OSError:
        pass
    for pid in _cgroup_members(group):  # alive while listed: not recycled yet
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _remove_cgroups(groups: list[str]) -> list[str]:
    """Remove the emptied cgroups, deepest first (a killed process leaves in a moment);
    return those left."""
    deadline = time.monotonic() + KILL_WAIT_S
    for at, group in enumerate(groups):
        while True:
            try:
                os.rmdir(group)
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    return groups[at:]  # the next server on this host removes them
                time.sleep(EMPTY_CHECK_S)  # noqa: TID251 -- the guardian has no loop
    return []


def _count(count: int, noun: str = "process") -> str:
    """values/plurals.py's `plural`, for the two nouns said here: nothing of ours is imported."""
    plural = "processes" if noun == "process" else f"{noun}s"
    return f"{count} {noun if count == 1 else plural}"


def _is_stream(fd: int) -> bool:
    """True if `fd` is a pipe or a socket (not a file, a terminal or /dev/null)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _let_go_of_log() -> None:
    """Point stderr at /dev/null: the server's log is no longer held open here."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)


def _log(log_format: str, level: str, message: str) -> None:
    """One line on stderr (the server's log), in the server's format; `off`: none."""
    if log_format == "off":
        return
    now = time.time()
    if log_format == "json":
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
        entry: dict[str, Any] = {
            "time": f"{stamp}.{int(now % 1 * 1000):03d}Z",
            "level": level,
            "logger": LOGGER,
            "message": message,
        }
        line = json.dumps(entry)
    else:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        line = f"{stamp},{int(now % 1 * 1000):03d} {level} {LOGGER}: {message}"
    with contextlib.suppress(OSError):
        os.write(2, line.encode() + b"\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
