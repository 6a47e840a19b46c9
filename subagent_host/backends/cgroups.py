"""Linux cgroup v2, as far as process tracking needs it: where a writable hierarchy is,
one cgroup per child, the processes in it, what they used, and ending them all.

A process cannot leave its cgroup by forking, `setsid`, double forking or
clearing its environment: whatever a child starts stays in the child's cgroup
(only a privileged process can move itself out by writing another cgroup's
`cgroup.procs`). The layout, under the writable cgroup2 mount (a pure v2 host
mounts it at /sys/fs/cgroup, a hybrid one at /sys/fs/cgroup/unified):

    <mount>/subagent-host/i<server pid>-<server start ticks>-locked/<child cgroup>

The live server holds an `flock` on its instance directory for as long as it
lives (the lock goes with the process, however it dies). A lock is the same for
every PID namespace on the host, where a pid is not: a server in another PID
namespace sees a live one's pid as gone, never its lock. So an instance whose
lock any later server can take is gone, and that server ends and removes what it
left. An instance named without `-locked` (an older server's, which holds no
lock) is gone when no process has its pid and start time (field 22 of
/proc/<pid>/stat) in the sweeper's namespace.

A child may make cgroups below its own and move processes there: a child's
members are those of its cgroup and of every cgroup below it, `cgroup.kill`
ends them all, and a cgroup is removed with everything below it, deepest first.

A server that itself runs in a child's cgroup of another server (a nested
server) makes its hierarchy below its own cgroup, not beside the outer server's:
whatever it starts stays inside the outer child's cgroup, and ends with it.

Nothing here signals a process except `Group.kill` (the kernel's `cgroup.kill`,
or SIGKILL of each member where that file is missing, before Linux 5.14): the
stop sequence is the supervisor's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import signal
import time
from pathlib import Path
from typing import Final

import attrs

logger = logging.getLogger(__name__)

HIERARCHY_NAME: Final = "subagent-host"
# Where cgroup2 is mounted: pure v2 first, then the unified mount of a hybrid host.
KNOWN_MOUNTS: Final = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
INSTANCE_PATTERN: Final = re.compile(r"i(\d+)-(\d+)(-locked)?")
LOCKED_SUFFIX: Final = "-locked"
# Taking an instance's lock can lose a race with a sweeper that found the new,
# still unlocked directory (in another PID namespace) and removed it: retried.
LOCK_TRIES: Final = 20
LOCK_RETRY_S: Final = 0.01
# Where the server cannot start a child inside its cgroup (see `home_for`), the
# child is started through this trampoline: it enters the cgroup named by $0
# (writing 0 to cgroup.procs moves the writer), then becomes the program: `exec`
# keeps the pid, so the child is inside before the program runs its first
# instruction, and cannot fork before. Python's own way (a preexec_fn) forces
# fork instead of vfork, which for a server of this size cost 6-7 ms a spawn;
# the shell costs ~0.7 ms (bench/runs.py, tracking rows).
# A shell exports PWD to what it execs, set to where it is: the child gets the
# PWD it was given (the trampoline's first argument after the cgroup), or none.
# Exit 126 (the shell's "cannot execute") if the cgroup is gone meanwhile.
ENTER_SHELL: Final = "/bin/sh"
ENTER_SCRIPT: Final = 'echo 0 >"$0" || exit 126; PWD=$1; shift; exec "$@"'
ENTER_SCRIPT_NO_PWD: Final = 'echo 0 >"$0" || exit 126; unset PWD; exec "$@"'
# One read's worth of a cgroup file (cpu.stat is ~10 lines; the cgroup.procs of a
# tree of thousands is read on until it is whole, see `_read`).
READ_BYTES: Final = 64 * 1024
# A member that forks while SIGKILL is sent one by one (no cgroup.kill) is
# caught by the next pass; this bounds the passes.
KILL_PASSES: Final = 8


def ticks_now() -> int:
    """Now, in the clock ticks since boot that `start_ticks` counts in (a process started
    from now on has a start of at least this)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of its stat), None if gone."""
    try:
        stat = os.open(f"/proc/{pid}/stat", os.O_RDONLY)  # one read, no buffered file object
        try:
            fields = os.read(stat, 4096).rpartition(b")")[2].split()
        finally:
            os.close(stat)
    except OSError:
        return None
    # Field 22 is the 20th after the command (which may hold spaces: split after its ")").
    return int(fields[19])


def instance_name(pid: int, ticks: int) -> str:
    """The name of the instance cgroup of the server process `pid` started at `ticks`."""
    return f"i{pid}-{ticks}{LOCKED_SUFFIX}"


def boot_time() -> float:
    """When the system booted, in seconds since the epoch: `btime` of /proc/stat, as psutil
    reads it (start ticks count from it). 0.0 where there is no such line."""
    with contextlib.suppress(OSError), open("/proc/stat", "rb") as stat:
        for line in stat:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    return 0.0


def cgroup2_mounts() -> list[Path]:
    """Every cgroup2 mount point, the usual places first."""
    found: list[Path] = []
    with contextlib.suppress(OSError), open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) >= 3 and fields[2] == "cgroup2":
                found.append(Path(fields[1].replace("\\040", " ")))
    return sorted(found, key=lambda path: (path not in KNOWN_MOUNTS, str(path)))


def own_cgroup(mount: Path) -> Group | None:
    """This process's cgroup in the cgroup2 hierarchy mounted at `mount` (the `0::` line of
    /proc/self/cgroup); None where there is none or it lies outside what this mount shows."""
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("0::"):
                relative = line[3:].rstrip("\n")
                # "/.." and kin: outside this cgroup namespace's root, not under `mount`.
                if not relative.startswith("/") or ".." in relative.split("/"):
                    return None
                return Group(mount / relative.lstrip("/"))
    return None


def home_for(hierarchy: Hierarchy, instance: Group) -> Group | None:
    """The server's own cgroup if the server may step into a child's cgroup to start it there.

    Only when that cgroup is an ancestor of `instance` (in practice the root of
    the hierarchy, or of a container's cgroup namespace), and we may write its
    `cgroup.procs`: it then counts as populated (its `cgroup.events`) all the
    while the server is away below it, so nothing that watches it — systemd, a
    container runtime — ever sees it empty. Elsewhere (a systemd service or
    scope of its own) children go through the trampoline (ENTER_SCRIPT).
    """
    home = own_cgroup(hierarchy.mount)
    if home is None or not instance.path.is_relative_to(home.path):
        return None
    if not os.access(home.procs_path, os.W_OK):
        return None
    return home


def move_self(group: Group) -> None:
    """Move this whole process (every thread) into `group`. Raises OSError."""
    procs = os.open(group.procs_path, os.O_WRONLY)
    try:
        os.write(procs, b"0")
    finally:
        os.close(procs)


def find_hierarchy() -> Hierarchy | None:
    """The writable cgroup v2 hierarchy of this host, our directory created in it; else None.

    Below this process's own cgroup when that is inside our directory already
    (a server started by another server's child): see the module's docstring.
    """
    for mount in cgroup2_mounts():
        nested = _nested_root(mount)
        root = nested or mount / HIERARCHY_NAME
        try:
            root.mkdir(exist_ok=True)
        except OSError:
            continue
        if os.access(root / "cgroup.procs", os.W_OK) and os.access(root, os.W_OK):
            # Below a child's cgroup, with processes in it, no controller can be enabled.
            memory = nested is None and _enable_memory(mount, root)
            return Hierarchy(mount=mount, root=root, memory=memory)
    return None


def _nested_root(mount: Path) -> Path | None:
    """Our directory below this process's own cgroup, if that is inside another server's
    hierarchy; None otherwise."""
    own = own_cgroup(mount)
    if own is None or not own.path.is_relative_to(mount / HIERARCHY_NAME):
        return None
    return own.path / HIERARCHY_NAME


def _enable_memory(mount: Path, root: Path) -> bool:
    """Turn the memory controller on for our subtree where the host has one (for memory.peak)."""
    try:
        if "memory" not in (mount / "cgroup.controllers").read_text().split():
            return False  # e.g. a hybrid host: memory is a v1 controller there
        for parent in (mount, root):
            if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                (parent / "cgroup.subtree_control").write_text("+memory")
    except OSError:
        return False
    return True


@attrs.frozen
class Hierarchy:
    """Our directory in the writable cgroup2 mount."""

    mount: Path
    root: Path
    memory: bool
    """Whether children's cgroups have a memory controller (and so `memory.peak`)."""

    def instance(self, pid: int, ticks: int) -> Group:
        """The cgroup of the server process `pid` started at `ticks` (created here), its lock
        taken and held for the rest of this process's life (`_held`). Raises OSError."""
        group = Group(self.root / instance_name(pid, ticks))
        for _ in range(LOCK_TRIES):
            group.path.mkdir(exist_ok=True)
            if _hold(group.path):
                break
            # Only in a race with a sweeper, at start: nothing tells a process that does
            # not block in flock (a blocking flock would wait forever on a live server
            # of another PID namespace that happens to have the same pid and start time).
            time.sleep(LOCK_RETRY_S)  # noqa: TID251 - bounded: LOCK_TRIES of 10 ms, once
        else:
            raise OSError(errno.EBUSY, f"cannot lock cgroup {group.path}")
        if self.memory:
            with contextlib.suppress(OSError):
                (group.path / "cgroup.subtree_control").write_text("+memory")
        return group

    def gone_instances(self) -> list[Gone]:
        """Instance cgroups whose server is gone, each with its lock taken (see the module's
        docstring): the caller closes it once the instance is swept."""
        gone: list[Gone] = []
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.root):
                named = INSTANCE_PATTERN.fullmatch(entry.name)
                if named is None or not entry.is_dir(follow_symlinks=False):
                    continue
                pid, ticks = int(named[1]), int(named[2])
                if named[3] is None:  # an older server's: no lock, its pid tells
                    if start_ticks(pid) != ticks:
                        gone.append(Gone(Group(Path(entry.path)), None))
                    continue
                lock = _try_lock(Path(entry.path))
                if lock is None:
                    continue  # its server holds it: alive, in whatever namespace
                if start_ticks(pid) == ticks:
                    # A server of this namespace between making it and locking it.
                    os.close(lock)
                    continue
                gone.append(Gone(Group(Path(entry.path)), lock))
        return gone


@attrs.frozen
class Gone:
    """The instance cgroup of a gone server, and its lock while it is swept."""

    group: Group
    lock: int | None

    def release(self) -> None:
        if self.lock is not None:
            os.close(self.lock)


# The locks this process holds on its instance cgroups, by path: a lock is one
# per open file, so every Supervisor of the process (tests make several) shares one.
_held: dict[Path, int] = {}


def _hold(path: Path) -> bool:
    """Hold the lock on the instance directory `path`; False if it cannot be had now
    (a sweeper holds it, or removed the directory meanwhile)."""
    held = _held.get(path)
    if held is not None:
        if _same_directory(held, path):
            return True
        os.close(held)  # removed and made anew since: a new directory, a new lock
        del _held[path]
    lock = _try_lock(path)
    if lock is None:
        return False
    if not _same_directory(lock, path):
        os.close(lock)
        return False
    _held[path] = lock
    return True


def _same_directory(fd: int, path: Path) -> bool:
    try:
        opened, named = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)


def _try_lock(path: Path) -> int | None:
    """An open descriptor of the directory holding its exclusive lock; None if another
    open file holds it (or it is gone). Close-on-exec: no child or guardian inherits it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


@attrs.frozen
class Group:
    """One cgroup: a child's, or a server instance's (whose children are cgroups)."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    def child(self, name: str) -> Group:
        """Create the cgroup `name` below this one (EEXIST is an error: names are unique)."""
        group = Group(self.path / name)
        group.path.mkdir()
        return group

    def children(self) -> list[Group]:
        try:
            return [
                Group(Path(entry.path))
                for entry in os.scandir(self.path)
                if entry.is_dir(follow_symlinks=False)
            ]
        except OSError:
            return []

    @property
    def procs_path(self) -> Path:
        """`cgroup.procs`: writing b"0" to it moves the writer into the cgroup."""
        return self.path / "cgroup.procs"

    def below(self) -> list[Group]:
        """Every cgroup below this one, deepest first (the order of removal)."""
        found: list[Group] = []
        for child in self.children():
            found += child.below()
            found.append(child)
        return found

    def pids(self) -> list[int]:
        """The processes in this cgroup and every cgroup below it now (zombies are not
        members any more), never this server: nothing that ends a child's tree may find
        it there (see `kill`)."""
        me = os.getpid()
        return [pid for pid in self._members() if pid != me]

    def _members(self) -> list[int]:
        members: list[int] = []
        for group in (self, *self.below()):
            try:
                text = _read(group.path / "cgroup.procs")
            except OSError:
                continue
            members += [int(pid) for pid in text.split()]
        return members

    def kill(self) -> None:
        """SIGKILL every process in the cgroup and below, forks included (`cgroup.kill`,
        Linux 5.14).

        Never this server: it is only ever inside a child's cgroup for the
        moment it forks the child there (supervisor.py), a synchronous step no
        kill of ours can interleave with; should it ever be left there, its
        fellow members are killed one by one instead.
        """
        if os.getpid() not in self._members():
            try:
                (self.path / "cgroup.kill").write_text("1")
                return
            except FileNotFoundError:
                pass  # an older kernel: one by one until none is left
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    logger.warning("cannot write %s/cgroup.kill: %s", self.path, exc)
        else:
            logger.error("this server is in cgroup %s: killing the others one by one", self.path)
        for _ in range(KILL_PASSES):
            members = self.pids()
            if not members:
                return
            for pid in members:  # a pid in cgroup.procs is alive: it is not recycled yet
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def cpu_seconds(self) -> float | None:
        """CPU time used by every process that ever ran in the cgroup (`cpu.stat` usage_usec)."""
        try:
            for line in _read(self.path / "cpu.stat").splitlines():
                key, _, value = line.partition(b" ")
                if key == b"usage_usec":
                    return int(value) / 1_000_000
        except (OSError, ValueError):
            pass
        return None

    def memory_peak(self) -> int | None:
        """The cgroup's peak memory use in bytes (`memory.peak`), where a controller gives one."""
        try:
            return int(_read(self.path / "memory.peak"))
        except (OSError, ValueError):
            return None

    def remove(self) -> bool:
        """Remove the cgroup and every cgroup below it (deepest first); False while any
        still has processes."""
        try:
            self.path.rmdir()  # mostly nothing is below: one call
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                logger.warning("cannot remove cgroup %s: %s", self.path, exc)
                return False
        for group in self.below():
            _rmdir(group.path)
        return _rmdir(self.path)


def _rmdir(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY):
            logger.warning("cannot remove cgroup %s: %s", path, exc)
        return False
    return True


def _read(path: Path) -> bytes:
    """A cgroup file, mostly in one read: no buffered text file on the way (a child's end
    reads three of them before its run is answered).

    A kernel seq file fills a read as far as whole lines fit, so a read that
    came back less than half full was the end; a fuller one is followed up.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, READ_BYTES)
        if len(data) < READ_BYTES // 2:
            return data
        chunks = [data]
        while chunk := os.read(fd, READ_BYTES):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def entering(group: Group, argv: tuple[str, ...], *, pwd: str | None) -> tuple[str, ...]:
    """`argv` run so that it is inside `group` before it can fork (see ENTER_SCRIPT);
    `pwd` is the child's own PWD variable, if it was given one."""
    procs = str(group.procs_path)
    if pwd is None:
        return (ENTER_SHELL, "-c", ENTER_SCRIPT_NO_PWD, procs, *argv)
    return (ENTER_SHELL, "-c", ENTER_SCRIPT, procs, pwd, *argv)
