"""Which processes make up a child's tree, and what the tree uses.

What "the tree" is depends on the tracking mode chosen at start (tracking.py):
the child's cgroup, or its descendants plus the orphans carrying its run
marker (`RUN_MARKER`, the run's id in the environment). The stop sequence
(termination.py) ends what `snapshot` finds; `find_strays` finds what runs of
a server that died left; `sample_now` measures trees. All of them scan the
process table: they run in a worker thread, never on the loop.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from subagent_host.backends.child import Child, TreeUsage
from subagent_host.backends.liveness import START_TOLERANCE_S
from subagent_host.backends.onfirstuse import psutil
from subagent_host.backends.termination import Member, pin_group

if TYPE_CHECKING:
    from subagent_host.backends.lifeline import GuardianSlot

RUN_MARKER: Final = "SUBAGENT_HOST_RUN_ID"


class Claims:
    """Processes a stop sequence is ending, and for which child.

    Without cgroups, two children ending at once may both find one orphan (it
    carries their run's marker, or none); it is ended, and counted, by the
    first. Written from snapshot threads, hence the lock.
    """

    def __init__(self) -> None:
        self._claimed: dict[int, Child] = {}
        self._claiming = threading.Lock()

    def keep_own(self, found: dict[int, psutil.Process], child: Child) -> None:
        """Claim the processes `found` for `child`; drop those another child claimed."""
        with self._claiming:
            for pid in list(found):
                if self._claimed.setdefault(pid, child) is not child:
                    del found[pid]  # another child's stop sequence is ending it

    def release(self, child: Child) -> None:
        """The child's stop sequence is over: its processes are no longer claimed."""
        with self._claiming:
            for pid in [pid for pid, owner in self._claimed.items() if owner is child]:
                del self._claimed[pid]


def snapshot(
    child: Child,
    started: Mapping[int, Child],
    is_subreaper: bool,
    guardian: GuardianSlot,
    claims: Claims,
) -> list[Member]:
    """Every live process of the child's tree but the child itself, each pinned by a pidfd.

    Cgroup mode: the members of its cgroup. Otherwise its descendants, the
    orphans carrying its run marker (adopted ones, or in marker mode any
    process), their descendants, and with a subreaper every adopted process
    no live child claims. `started`: the children the server started and has
    not finished waiting for; `guardian`: the server's guardian, if it has one
    yet. Runs in a worker thread.
    """
    if child.group is not None:
        return pin_group(child.group, child)
    found: dict[int, psutil.Process] = {}
    if child.pid_is_ours():
        with contextlib.suppress(psutil.Error):
            descendants = psutil.Process(child.pid).children(recursive=True)
            if child.pid_is_ours():  # still: these are the descendants of our child
                found.update((process.pid, process) for process in descendants)
    live = {c.marker for c in started.values() if c is not child and not c.has_exited()}
    # Another live child of the same run carries the same marker: its orphans
    # are told apart from this one's only once the run's last child ends.
    by_marker = bool(child.marker) and child.marker not in live
    if is_subreaper:
        for process in adopted(started, guardian):
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
    claims.keep_own(found, child)
    members = [Member.pin(process) for process in found.values()]
    return [member for member in members if member is not None]


def adopted(started: Mapping[int, Child], guardian_slot: GuardianSlot) -> list[psutil.Process]:
    """Our own children that we did not start (nor the guardian): orphans reparented to us."""
    try:
        # Listed first, then told apart: a guardian listed was started before.
        listed = psutil.Process().children()
        guardian = guardian_slot.current
        return [
            p for p in listed if p.pid not in started and not (guardian and guardian.owns(p.pid))
        ]
    except psutil.Error:
        return []


def sample_now(children: list[Child], trees: bool) -> dict[int, TreeUsage]:
    """Measure each child (with `trees`, its whole tree), by child pid (a worker thread's job).

    One call walks /proc once for all children. A child in a cgroup is measured
    over its cgroup's processes, escapers included.
    """
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


def _marker_of(process: psutil.Process) -> str | None:
    """The run marker in the process's initial environment (None: none, or unreadable)."""
    try:
        return process.environ().get(RUN_MARKER)
    except psutil.Error:
        return None


def find_strays(markers: frozenset[str], recorded: list[tuple[int, float | None]]) -> list[Member]:
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
