"""The stop sequence: end a child's tree, SIGTERM, a grace, then SIGKILL of the whole tree.

RELIABILITY.md ("Killing a process tree"):

    snapshot the tree -> SIGTERM the group and every member outside it
    -> wait up to the grace -> re-snapshot -> SIGKILL the group, every
    straggler (and the child's cgroup) -> reap.

Every process other than the direct child is a `Member`, pinned by a pidfd
before it is signalled, so a recycled pid is never hit; waiting for them is
event-driven (a pidfd becomes readable when its process exits). What the tree
is, the snapshot, is trees.py's; the sweeps of gone servers' leftovers
(sweeps.py) use the same pinning, signalling and waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import select
import signal
from collections.abc import Callable
from typing import Final

import attrs

from subagent_host.backends.cgroups import Group, start_ticks
from subagent_host.backends.child import Child, open_pidfd
from subagent_host.backends.onfirstuse import psutil
from subagent_host.values.plurals import plural

# The supervisor's log lines keep one logger, whichever of its modules writes them.
logger = logging.getLogger("subagent_host.backends.supervisor")

# A cgroup whose processes were all SIGKILLed is empty moments later; this is
# how often it is checked until then (bounded by KILL_WAIT_S).
EMPTY_CHECK_S: Final = 0.01
# After SIGKILL the kernel ends processes promptly; this only bounds the wait
# for a process stuck in uninterruptible sleep (D state).
KILL_WAIT_S: Final = 5.0


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


async def stop_tree(
    child: Child, grace_s: float, snapshot: Callable[[Child], list[Member]]
) -> TreeStopReport:
    """End the child's whole tree: SIGTERM, up to `grace_s` seconds, then SIGKILL.

    `snapshot` finds the tree's processes but the child, pinned (it runs in a
    worker thread); every member it returned is closed before this returns.
    """
    members = await asyncio.to_thread(snapshot, child)
    stragglers: list[Member] = []
    # After the child's own exit, what is signalled is what it left behind.
    tree = "what it left" if child.has_exited() else "its tree"
    report: TreeStopReport | None = None  # None if it raised
    try:
        if not members and child.has_exited():
            report = TreeStopReport(StopStep.NOTHING_LEFT, 0)
            return report
        signalled = _signal_tree(child, members, signal.SIGTERM)
        tell(
            child,
            "SIGTERM sent to %s (%s); grace %.3f s",
            tree,
            count_processes(signalled),
            grace_s,
        )
        if await wait_exited(child, members, grace_s) and not _has_members(child):
            report = TreeStopReport(StopStep.SIGTERM, signalled)
            return report
        stragglers = await asyncio.to_thread(snapshot, child)
        tell(
            child,
            "grace of %.3f s elapsed: %s left",
            grace_s,
            count_processes(len(stragglers) + int(not child.has_exited())),
        )
        killed = _signal_tree(child, stragglers, signal.SIGKILL)
        if child.group is not None:
            child.group.kill()  # also whatever forked since the snapshot
        tell(child, "SIGKILL sent to %s (%s)", tree, count_processes(killed))
        if not await wait_exited(child, stragglers, KILL_WAIT_S):
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
            tell(
                child,
                "stop done at %s: %s besides the child ended",
                report.step.value,
                count_processes(ended),
            )
        for member in (*members, *stragglers):
            member.close()


async def end_descendants(
    child: Child,
    grace_s: float,
    snapshot: Callable[[Child], list[Member]],
    since_ticks: int | None = None,
) -> int:
    """End what the running child started and left running (its tree but itself):
    SIGTERM to each, up to `grace_s` seconds, then SIGKILL. Its group is never
    signalled (the child is in it). With `since_ticks` (clock ticks since boot), only
    the processes started since then: a CLI that is a launcher (codex's node script
    starting its binary) keeps the processes it runs on. How many processes were ended."""

    def started_since(child: Child) -> list[Member]:
        return _started_since(snapshot(child), since_ticks)

    members = await asyncio.to_thread(started_since, child)
    stragglers: list[Member] = []
    try:
        if not members:
            return 0
        for member in members:
            member.send_signal(signal.SIGTERM)
        tell(child, "SIGTERM sent to what it left running (%s)", count_processes(len(members)))
        if await wait_exited(None, members, grace_s):
            return len(members)
        stragglers = await asyncio.to_thread(started_since, child)
        for member in stragglers:
            member.send_signal(signal.SIGKILL)
        tell(child, "SIGKILL sent to what it left running (%s)", count_processes(len(stragglers)))
        if not await wait_exited(None, stragglers, KILL_WAIT_S):
            logger.error(
                "%r: processes survived SIGKILL for %.0f s", child, KILL_WAIT_S,
                extra=child.log_fields,
            )  # fmt: skip
        return len({member.pid for member in (*members, *stragglers)})
    finally:
        child.leftovers_ended += len({member.pid for member in (*members, *stragglers)})
        for member in (*members, *stragglers):
            member.close()


def _started_since(members: list[Member], since_ticks: int | None) -> list[Member]:
    """The members started at or after `since_ticks` (all, for None); the others are let go
    (their pidfds closed). Runs in a worker thread."""
    if since_ticks is None:
        return members
    kept = []
    for member in members:
        started = start_ticks(member.pid)  # pinned: the pid is still this process's
        if started is not None and started >= since_ticks:
            kept.append(member)
        else:
            member.close()
    return kept


def tell(child: Child, message: str, *args: object) -> None:
    """One step of a stop sequence, at INFO: with the run's lines (runs/lifecycle_log.py),
    `--log-level info` tells what ended a run's processes, and how."""
    if logger.isEnabledFor(logging.INFO):
        logger.info("%r: " + message, child, *args, extra=child.log_fields)


def count_processes(count: int) -> str:
    return plural(count, "process", "processes")


def _has_members(child: Child) -> bool:
    """True if the child's cgroup still holds a process other than the child."""
    if child.group is None:
        return False
    return any(pid != child.pid for pid in child.group.pids())


def pin_group(group: Group, child: Child | None) -> list[Member]:
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


async def wait_exited(child: Child | None, members: list[Member], timeout_s: float) -> bool:
    """Wait up to `timeout_s` for the direct child and every member to have exited.

    A pidfd becomes readable when its process exits, so this is event-driven
    for every process, ours or not.
    """
    loop = asyncio.get_running_loop()
    waits: list[asyncio.Future[object]] = []
    if child is not None:
        waits.append(asyncio.ensure_future(child_exited(child)))
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


async def child_exited(child: Child) -> None:
    """Return once the direct child has exited (whether or not it has been reaped)."""
    await asyncio.shield(child.exited)


def _set_once(future: asyncio.Future[object]) -> None:
    if not future.done():
        future.set_result(None)


async def remove_all_when_empty(groups: list[Group]) -> list[Group]:
    """Remove every cgroup once empty, all within one KILL_WAIT_S; return those left."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + KILL_WAIT_S
    left = list(groups)
    while left := [group for group in left if not group.remove()]:
        if loop.time() > deadline:
            break
        await asyncio.sleep(EMPTY_CHECK_S)  # no event says a cgroup became empty
    return left


async def remove_when_empty(group: Group) -> bool:
    """Remove the cgroup once its last process is gone (killed ones take a moment)."""
    return not await remove_all_when_empty([group])


@attrs.define
class Member:
    """A process of a tree, pinned by a pidfd so a recycled pid is never signalled."""

    pid: int
    pgid: int | None
    pidfd: int | None

    @classmethod
    def pin(cls, process: psutil.Process) -> Member | None:
        """Open a pidfd, then check it is still the process psutil saw (create time)."""
        pidfd = open_pidfd(process.pid)
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
        pidfd = open_pidfd(pid)
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
