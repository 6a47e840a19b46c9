"""The Ray actor that holds one remote child: it starts the shim, streams, stops, reports.

Imported by the bridge (ray_bridge.py), in the Ray driver process, and by Ray in
the worker it places the actor on. One actor per child, never restarted: a lost
worker is a lost child, and the shim (shim.py) ends the child's tree when this
actor's process goes away for any reason (its lifeline closes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Final

import ray

from subagent_host.executors.shimmed import ShimmedChild, start_shimmed

# The most one streamed chunk holds: fewer round trips than lines, and bounded.
CHUNK_BYTES: Final = 256 * 1024
# How many chunks the actor streams ahead of what the bridge took (at most 4 MiB in flight
# per child). Past that its generator waits, the queue behind it fills, the actor reads no
# more of the child's pipes and the child blocks on write: a held child (the bridge stops
# taking its output) holds still, and nothing piles up in the cluster meanwhile.
CHUNKS_AHEAD: Final = 16


class ChildActor:
    """One child on this node: started once, streamed once, stopped on request."""

    def __init__(self) -> None:
        self._child: ShimmedChild | None = None

    async def start(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Start the child under its shim; its pids and node. OSError: it cannot start."""
        import os

        self._child = await start_shimmed(
            spec["argv"],
            cwd=spec["cwd"],
            env=spec["env"],
            grace_s=float(spec["graceS"]),
            stdin=spec["stdin"].encode() if spec.get("stdin") is not None else None,
            keep_stdin=bool(spec.get("keepStdin")),
        )
        context = ray.get_runtime_context()
        return {
            "pid": self._child.pid,
            "shim": self._child.shim,
            "worker": os.getpid(),
            "node": context.get_node_id(),
        }

    @ray.method(  # type: ignore[untyped-decorator]
        num_returns="streaming", _generator_backpressure_num_objects=CHUNKS_AHEAD
    )
    async def output(self) -> AsyncIterator[tuple[str, bytes]]:
        """The child's stdout and stderr as they come, in chunks, until both end; never more
        than CHUNKS_AHEAD chunks ahead of the reader (and one waiting per pipe)."""
        assert self._child is not None
        queue: asyncio.Queue[tuple[str, bytes] | None] = asyncio.Queue(maxsize=1)

        async def drain(name: str, reader: asyncio.StreamReader) -> None:
            while chunk := await reader.read(CHUNK_BYTES):
                await queue.put((name, chunk))
            await queue.put(None)

        tasks = [
            asyncio.create_task(drain("stdout", self._child.stdout)),
            asyncio.create_task(drain("stderr", self._child.stderr)),
        ]
        ended = 0
        try:
            while ended < len(tasks):
                item = await queue.get()
                if item is None:
                    ended += 1
                else:
                    yield item
        finally:
            for task in tasks:
                task.cancel()

    async def write_input(self, data: bytes) -> None:
        """Write to the child's stdin (kept open); done once its pipe took it. The bridge
        awaits each call before the next: an async actor may run calls out of order."""
        if self._child is not None:
            await self._child.write_input(data)

    async def close_input(self) -> None:
        if self._child is not None:
            self._child.close_input()

    async def signal_group(self, signum: int) -> None:
        if self._child is not None:
            self._child.signal_group(signum)

    async def end_descendants(self, grace_s: float, age_ticks: int | None) -> int:
        """End what the child left running (with `age_ticks`, what started at most that
        many clock ticks ago); how many processes."""
        if self._child is None:
            return 0
        return await self._child.end_descendants(grace_s, age_ticks)

    async def stop(self, grace_s: float) -> None:
        """The stop sequence for the whole tree (the shim carries it out)."""
        if self._child is not None:
            self._child.stop(grace_s)

    async def exit(self) -> dict[str, Any]:
        """How the child ended, once nothing of its tree is left."""
        assert self._child is not None
        ended = await self._child.exit()
        return {
            "returncode": ended.returncode,
            "stoppedBy": ended.stopped_by,
            "leftovers": ended.leftovers,
            "cpuSeconds": ended.cpu_seconds,
            "peakRssBytes": ended.peak_rss_bytes,
            "processes": ended.processes,
        }


# One per child: no CPU of the node's reserved (the child's own resources come from its
# placement), and never restarted: a restarted actor would not have the child.
RemoteChildActor: Any = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(ChildActor)
