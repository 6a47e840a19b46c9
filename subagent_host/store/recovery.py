"""Start-up of a server process on a state directory: register it, recover what dead ones left.

RELIABILITY.md ("SQLite for run history"): each server process has an id and
its pid and start time on record. At start, in one immediate transaction, runs
of server processes that are gone become `interrupted` exactly once; then the
processes those runs left are ended with the stop sequence (the process work
is the supervisor's, backends/): first everything in
the cgroups of server instances that are gone (cgroup tracking; whatever state
directory they used), then what still carries one of those runs' marker — a
recorded pid only together with its start time.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from subagent_host.backends.liveness import process_is_alive, this_process
from subagent_host.backends.sessions import SEALED_AT_RECOVERY, Seal, SessionFiles
from subagent_host.backends.supervisor import Supervisor, SweepHandedOver
from subagent_host.runs.state import ChildRun, RunStateMachine, utc_now
from subagent_host.store import instances
from subagent_host.store.database import Database
from subagent_host.values.plurals import plural

logger = logging.getLogger(__name__)


async def start_instance(
    store: Database,
    supervisor: Supervisor,
    grace_ms: int,
    sessions: SessionFiles | None = None,
    reserved: str | None = None,
) -> tuple[str, asyncio.Task[int], tuple[str, ...]]:
    """Register this process; mark dead servers' runs interrupted; end their leftovers.

    `reserved` is the run ids this server reserves (run_ids.py), written with
    its record. An interrupted attempt's session file is sealed as this server finds it
    (`recovered`): the attempt's own end never came to seal it.
    Returns this instance's id, the task ending leftover processes (the server
    awaits it before it exits, or hands what it still ends to its guardian:
    `Supervisor.hand_over_sweeps`) and the ids of the runs deleted with idle sessions.
    """
    instance = uuid.uuid4().hex
    pid, create_time = this_process()
    await store.call(
        instances.register_instance, store, instance, pid, create_time, utc_now(), reserved
    )
    seal = _sealer(sessions)

    interrupted, _ = await store.call(
        instances.recover, store, instance, process_is_alive, RunStateMachine(), seal
    )
    if interrupted:
        logger.warning(
            "marked %s of an ended server process interrupted", plural(len(interrupted), "run")
        )
    pruned = await store.call(instances.prune_stale, store, instance, utc_now())
    if pruned.sessions or pruned.instances:
        logger.info(
            "deleted %s (%s) and %s",
            plural(pruned.sessions, "idle session"),
            plural(pruned.runs, "run"),
            plural(pruned.instances, "ended server record"),
        )
    # Also what an earlier server was still ending when it died: the job is on disk
    # until it is done.
    pending, leftovers = await store.call(instances.pending_cleanups, store)
    task = asyncio.create_task(_clean_up(store, supervisor, pending, leftovers, grace_ms, seal))
    return instance, task, pruned.run_ids


def _sealer(sessions: SessionFiles | None) -> Callable[[ChildRun], Seal | None] | None:
    if sessions is None:
        return None

    def seal(child: ChildRun) -> Seal | None:
        return sessions.seal(child.backend, child.backend_session_id, SEALED_AT_RECOVERY)

    return seal


async def _clean_up(
    store: Database,
    supervisor: Supervisor,
    run_ids: list[str],
    leftovers: list[instances.Leftover],
    grace_ms: int,
    seal: Callable[[ChildRun], Seal | None] | None = None,
) -> int:
    """End what gone servers left: in their cgroups (any state directory), then by marker.

    Then seal the interrupted attempts' session files again: a CLI the dead
    server left running may have written to its file until it was ended here.
    A sweep handed to the guardian as the server leaves ends the clean-up there:
    what the store records as pending stays so, for the next server to finish.
    """
    try:
        ended = await supervisor.sweep_gone_instances(grace_ms / 1000)
        if not run_ids:
            return ended
        recorded = [(left.pid, left.create_time) for left in leftovers]
        strays = await supervisor.end_strays(frozenset(run_ids), recorded, grace_ms / 1000)
    except SweepHandedOver as handed:
        logger.info(
            "leaving %s left by gone servers to the guardian, with %.1f s of their grace left",
            plural(handed.processes, "process", "processes"),
            handed.grace_left_s,
        )
        return handed.processes
    if strays:
        logger.warning("ended %s left by interrupted runs", plural(strays, "process", "processes"))
    if seal is not None:
        await store.call(instances.seal_interrupted, store, run_ids, seal)
    # Only now may a resume of these runs be approved: its preflight must see the
    # session files sealed as the ended processes left them, not as they were before.
    await store.call(instances.finish_cleanups, store, run_ids)
    return ended + strays
