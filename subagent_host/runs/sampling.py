"""Sample what running children use: CPU so far, peak memory, peak process count, and
the tokens their CLI reported so far (so a running run's `usage` grows as it goes)."""

from __future__ import annotations

import asyncio
from typing import Final

from subagent_host.backends.base import OutputParser
from subagent_host.backends.supervisor import Supervisor, TreeUsage
from subagent_host.executors.base import ChildHandle
from subagent_host.executors.local import LocalHandle
from subagent_host.runs.state import ChildRun
from subagent_host.values.choices import TurnState
from subagent_host.values.facts import Resources

# Resource sampling walks the child's tree with psutil: often enough to see a
# peak that lasts a second, rarely enough to cost nothing noticeable.
RESOURCE_SAMPLE_S: Final = 1.0
# An interactive child waiting for input does nothing: its tree is walked only every
# this many sweeps (100 of them waiting cost a core's 1 % when walked every second).
WAITING_SAMPLE_EVERY: Final = 10


class ResourceSampler:
    """Samples the trees of all running children in one sweep, while any is running."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        # Running children (by identity: a remote child's pid is another machine's),
        # with the parser that knows their CLI's usage.
        self._sampled: dict[int, tuple[ChildHandle, ChildRun, OutputParser]] = {}
        self._sampler: asyncio.Task[None] | None = None
        self._sweeps = 0

    def watch(self, process: ChildHandle, child: ChildRun, parser: OutputParser) -> None:
        """Sample the running child from now on (the sweep starts if it is not running)."""
        self._sampled[id(process)] = (process, child, parser)
        if self._sampler is None or self._sampler.done():
            self._sampler = asyncio.create_task(self._sample_running())

    def unwatch(self, process: ChildHandle) -> None:
        """Sample the child no more: it has exited."""
        self._sampled.pop(id(process), None)

    async def _sample_running(self) -> None:
        """Every `RESOURCE_SAMPLE_S`, sample the trees of all running children in one sweep."""
        while self._sampled:
            # The sampling interval is the point of this wait; nothing else can end it.
            await asyncio.sleep(RESOURCE_SAMPLE_S)  # noqa: ASYNC110
            self._sweeps += 1
            every = self._sweeps % WAITING_SAMPLE_EVERY == 0
            running = {
                key: watched
                for key, watched in self._sampled.items()
                if every or not _waiting(watched[1])
            }
            # A remote child's tree is measured on its node, at its end (its shim's report).
            local = [p.child for p, _, _ in running.values() if isinstance(p, LocalHandle)]
            usages = await self._supervisor.sample(local, trees=True) if local else {}
            for key, (process, child, parser) in running.items():
                if key not in self._sampled:
                    continue  # it ended while the sweep ran
                usage = usages.get(process.pid) if isinstance(process, LocalHandle) else None
                if usage is not None:
                    record_usage(child, usage)
                child.usage = parser.usage or child.usage


def _waiting(child: ChildRun) -> bool:
    """An interactive child between turns (its end is measured whatever the samples saw)."""
    return child.turn is not None and child.turn.state is TurnState.WAITING


def record_usage(
    child: ChildRun, usage: TreeUsage | None, *, leftovers_ended: int | None = None
) -> None:
    """Fold a sample into the child's resources: CPU so far, peak memory, peak process count.

    The largest figure seen wins: a sample can only under-count (it misses what
    exited between two samples), and the end's figures can miss what a sample saw.
    """
    before = child.resources or Resources(cpu_seconds=0.0, peak_rss_bytes=0, processes=0)
    usage = usage or TreeUsage(cpu_seconds=0.0, rss_bytes=0, processes=0)
    child.resources = Resources(
        cpu_seconds=round(max(usage.cpu_seconds, before.cpu_seconds), 3),
        peak_rss_bytes=max(usage.rss_bytes, before.peak_rss_bytes),
        processes=max(usage.processes, before.processes),
        leftovers_ended=before.leftovers_ended if leftovers_ended is None else leftovers_ended,
    )
