"""The sweeps of what gone servers left: stray processes of their runs, their cgroups.

A server at start ends what servers that died left behind (store/recovery.py
asks, through `Supervisor.end_strays` and `Supervisor.sweep_gone_instances`):
SIGTERM, the grace, SIGKILL, as the stop sequence (termination.py). Should the
server be leaving meanwhile (`Supervisor.hand_over_sweeps`), a sweep in its
grace hands the rest to the guardian (lifeline.py) and raises `SweepHandedOver`.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from subagent_host.backends import cgroups
from subagent_host.backends.cgroups import Group, Hierarchy
from subagent_host.backends.lifeline import GuardianSlot, SweepLeft
from subagent_host.backends.termination import (
    KILL_WAIT_S,
    Member,
    count_processes,
    pin_group,
    remove_all_when_empty,
    wait_exited,
)
from subagent_host.backends.trees import find_strays

# The supervisor's log lines keep one logger, whichever of its modules writes them.
logger = logging.getLogger("subagent_host.backends.supervisor")


class SweepHandedOver(Exception):
    """A sweep of gone servers' leftovers handed the rest to the guardian (the server is
    leaving, `Supervisor.hand_over_sweeps`): it finishes it once the server has said bye."""

    def __init__(self, processes: int, grace_left_s: float) -> None:
        super().__init__(processes, grace_left_s)
        self.processes = processes
        """How many processes sent SIGTERM were still running, handed over."""
        self.grace_left_s = grace_left_s
        """What was left of their grace (the guardian gives them all of it)."""


class Sweeps:
    """The supervisor's sweeps of gone servers' leftovers, and their hand-over."""

    def __init__(self, guardian: GuardianSlot) -> None:
        self._guardian = guardian
        """The server's guardian, once it has one. (The supervisor reaps after each sweep.)"""
        self._leaving = asyncio.Event()
        """Set by `hand_over`: a sweep in its grace hands the rest to the guardian."""
        self._handed: list[cgroups.Gone] = []
        """Gone instances whose sweep the guardian finishes: locked until this server ends."""

    def hand_over(self) -> bool:
        """`Supervisor.hand_over_sweeps`: False when no guardian listens to take a sweep."""
        guardian = self._guardian.current
        if guardian is None or not guardian.is_listening:
            return False
        self._leaving.set()
        return True

    def release_handed(self) -> None:
        """Let go of the locks of the instances the guardian sweeps: last, as this process
        ends (the guardian takes them once it is gone)."""
        for instance in self._handed:
            instance.release()
        self._handed.clear()

    async def end_strays(
        self, markers: frozenset[str], recorded: list[tuple[int, float | None]], grace_s: float
    ) -> int:
        """`Supervisor.end_strays`: only processes carrying one of `markers` are touched."""
        members = await asyncio.to_thread(find_strays, markers, recorded)
        try:
            await self._term_then_kill(members, grace_s, [], markers)
            return len(members)
        finally:
            for member in members:
                member.close()

    async def sweep_gone_instances(self, hierarchy: Hierarchy | None, grace_s: float) -> int:
        """`Supervisor.sweep_gone_instances`, in the cgroups of `hierarchy` (None: none)."""
        if hierarchy is None:
            return 0
        gone = await asyncio.to_thread(hierarchy.gone_instances)
        groups = [instance.group for instance in gone]
        members = await asyncio.to_thread(
            lambda: [member for group in groups for member in pin_group(group, None)]
        )
        handed = False
        try:
            try:
                await self._term_then_kill(members, grace_s, groups)
            except SweepHandedOver:
                handed = True
                raise
            left = await remove_all_when_empty(groups)
            for group in left:
                logger.error("cgroup %s of a gone server still has processes", group.path)
            if members:
                logger.warning(
                    "ended %s left in the cgroups of gone servers", count_processes(len(members))
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

    async def _term_then_kill(
        self,
        members: list[Member],
        grace_s: float,
        groups: list[Group],
        markers: frozenset[str] = frozenset(),
    ) -> None:
        """SIGTERM every member, wait up to the grace, then SIGKILL them and the `groups`.

        Once the server is leaving (`hand_over`), the rest goes to the guardian
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
            guardian = self._guardian.current
            if guardian is not None and guardian.hand_over(left):
                raise SweepHandedOver(len(handed), kill_at - loop.time())
            exited = await wait_exited(None, members, max(0.0, kill_at - loop.time()))
        if exited and not any(group.pids() for group in groups):
            return
        for member in members:
            member.send_signal(signal.SIGKILL)
        for group in groups:
            group.kill()
        if not await wait_exited(None, members, KILL_WAIT_S):
            logger.error("leftover processes survived SIGKILL for %.0f s", KILL_WAIT_S)


async def _wait_exited_or(leaving: asyncio.Event, members: list[Member], timeout_s: float) -> bool:
    """`_wait_exited` for the members, cut short when `leaving` is set: True if all exited."""
    exited = asyncio.ensure_future(wait_exited(None, members, timeout_s))
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
