"""The bridge: the Ray driver, in a process of its own between the server and the cluster.

Run as `python -m subagent_host.executors.ray_bridge [--address ADDR] [--namespace NS]`
by the server (bridge.py), supervised like any child. Never inside the stdio
server: Ray prints to its driver's stdout and replaces its SIGTERM handler.

It speaks NDJSON on the stdin and stdout it was started with (Ray's own prints
go to stderr: fd 1 is pointed there before Ray is imported).

In (one object a line):
- `{"op": "start", "id", "argv", "cwd", "env", "stdin", "keepStdin"?, "graceS",
  "placement"?, "placementTimeoutS"}`: one child, in an actor of its own (`num_cpus=0`, the
  placement's resources, node and labels, never restarted, killed when the child
  ends); a few actors are kept started ahead for placements that reserve nothing
  (`WARM_ACTORS`), so such a child need not wait for a new Ray worker;
- `{"op": "stop", "id", "graceS"}`: the stop sequence for that child's tree;
- `{"op": "cancel", "id"}`: the child is not wanted any more, wherever it is (waiting
  for a node, starting, running): its actor is killed and its shim ends the tree;
- `{"op": "pause", "id"}` / `{"op": "resume", "id"}`: take no more of that child's
  output for now / again. While paused, its actor streams a bounded few chunks
  ahead, then stops reading the child's pipes and the child blocks on write; the
  other children flow on. Once its tree is gone (it exited, or was stopped), the
  pause holds nothing back any more: the rest of its output (bounded: those chunks
  and what its pipes hold) is taken at once. Its `exit` comes after all its output.
- `{"op": "input", "id", "bytes"}` followed right after its newline by that many bytes:
  written to that child's stdin (kept open: `keepStdin`); `{"op": "close-input", "id"}`
  closes it; `{"op": "signal", "id", "signal"}` signals the child's process group on
  its node. These three reach the child in the order they came (each waits for the
  one before it to be done on the node; writes waiting together go as one), and
  come to nothing once it ended. They may come while it waits for its node: they
  wait with it.
- `{"op": "end-descendants", "id", "req", "graceS", "ageTicks"}`: the stop sequence
  for what the running child left running (its tree but itself; with `ageTicks`, only
  the processes started at most that many clock ticks before its shim reads its
  node's clock).
End of input: every actor is killed (their shims end the trees) and the bridge exits.

Out: `{"event": "ready", "node"}` once joined; per child `started {id, pid, shim,
worker, node, actor}` (`actor`: its actor's name in the namespace), `output {id,
stream, bytes}` followed right after its newline by that many bytes of output as
they are (no encoding: the one copy a chunk takes here), then `exit {id,
returncode, stoppedBy, leftovers, cpuSeconds, peakRssBytes, processes}` (with
the tree's usage, as its shim counted it) or `failed {id, reason, message}` with
reason `unplaceable` (no node took it within `placementTimeoutS`), `spawn-failed`
or `node-lost` (its actor or node died). An unreachable cluster: `{"event":
"unreachable", "message"}` and exit status 3.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import socket
import sys
import uuid
from typing import Any, Final

# Ray prints to the driver's stdout: the protocol keeps the real one, Ray gets stderr.
PROTOCOL_FD: Final = os.dup(1)
os.dup2(2, 1)

import ray  # noqa: E402 -- only once fd 1 points away from the protocol
from ray.exceptions import (  # noqa: E402
    ActorDiedError,
    ActorUnavailableError,
    GetTimeoutError,
    RayActorError,
    RayTaskError,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from subagent_host.executors.bridge import (  # noqa: E402
    NODE_LOST,
    SPAWN_FAILED,
    UNPLACEABLE,
    placement_message,
    placement_of,
)
from subagent_host.executors.ray_actor import RemoteChildActor  # noqa: E402
from subagent_host.values.placement import Placement  # noqa: E402

EXIT_UNREACHABLE: Final = 3
# How long the head's port may take to answer before the cluster counts as unreachable
# (Ray itself retries for a minute and more before it gives up).
PROBE_TIMEOUT_S: Final = 5.0
# Actors kept started ahead of demand, per placement that reserves nothing (no
# `resources`): a new actor is a new Ray worker process, about half a second here,
# while a started one takes a child in milliseconds. An idle actor holds no CPU
# (`num_cpus=0`) and none of a node's custom resources, so it keeps nothing from
# anyone; it costs its worker's memory (tens of MB).
WARM_ACTORS: Final = 2
# An actor whose child ended (its whole tree gone, as its shim reported) goes back to
# the warm ones of its placement, up to this many idle: a sequential stream of children
# then starts no new worker at all.
IDLE_ACTORS: Final = 8


class _Input:
    """What the server said to one child's stdin and process group, in order, until its
    actor took it: `("write", bytes)`, `("close", None)`, `("signal", signum)`."""

    def __init__(self) -> None:
        self._said: collections.deque[tuple[str, Any]] = collections.deque()
        self._more = asyncio.Event()

    def put(self, kind: str, value: Any) -> None:
        self._said.append((kind, value))
        self._more.set()

    async def next(self) -> tuple[str, Any]:
        """The next thing said; writes that waited together, as one."""
        while not self._said:
            self._more.clear()
            await self._more.wait()
        kind, value = self._said.popleft()
        if kind == "write" and self._said and self._said[0][0] == "write":
            data = bytearray(value)
            while self._said and self._said[0][0] == "write":
                data += self._said.popleft()[1]
            value = bytes(data)
        return kind, value


async def _feed(actor: Any, said: _Input) -> None:
    """Carry what was said to a child to its actor, one call done before the next: an async
    actor may run calls out of order, the child must read its input in order. Ends with
    the actor (its child's loss is reported through its output)."""
    try:
        while True:
            kind, value = await said.next()
            if kind == "write":
                await actor.write_input.remote(value)
            elif kind == "close":
                await actor.close_input.remote()
            else:
                await actor.signal_group.remote(int(value))
    except (RayActorError, RayTaskError):
        return


class Bridge:
    """The children this driver holds, by the server's id for each."""

    def __init__(self) -> None:
        self._actors: dict[int, Any] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._inputs: dict[int, _Input] = {}
        """Per child, what was said to its stdin and group and its actor did not take yet."""
        self._ending: set[asyncio.Task[None]] = set()
        self._flowing: dict[int, asyncio.Event] = {}
        """Per child, set while its output is taken (cleared by `pause`)."""
        self._started: set[int] = set()
        # Actors are named, so an operator (or a test) can find a child's in the namespace;
        # the names of two bridges sharing a namespace never meet.
        self._names = f"subagent-host-{uuid.uuid4().hex[:12]}"
        self._made = 0
        self._warm: dict[str, list[tuple[Any, str]]] = {}
        """Started, idle actors (with their names) by placement (its canonical JSON)."""

    def send(self, message: dict[str, Any], payload: bytes = b"") -> None:
        """One line of JSON, and after it `payload`'s bytes as they are (an output's)."""
        data = memoryview(json.dumps(message).encode() + b"\n" + payload)
        while data:  # a pipe may take a large write in parts
            data = data[os.write(PROTOCOL_FD, data) :]

    def handle(self, message: dict[str, Any], payload: bytes = b"") -> None:
        op, child_id = message["op"], message["id"]
        said = self._inputs.get(child_id)
        if op == "start":
            self._flowing[child_id] = asyncio.Event()
            self._flowing[child_id].set()
            self._inputs[child_id] = _Input()
            task = asyncio.create_task(self._run(message))
            self._tasks[child_id] = task
            task.add_done_callback(lambda _: self._tasks.pop(child_id, None))
        elif op == "cancel" and (running := self._tasks.get(child_id)):
            running.cancel()  # `_run` kills its actor on the way out
        elif op == "stop" and (actor := self._actors.get(child_id)) is not None:
            actor.stop.remote(float(message["graceS"]))
        elif op == "pause" and child_id in self._flowing:
            self._flowing[child_id].clear()
        elif op == "resume" and child_id in self._flowing:
            self._flowing[child_id].set()
        elif op == "input" and said is not None:
            said.put("write", payload)
        elif op == "close-input" and said is not None:
            said.put("close", None)
        elif op == "signal" and said is not None:
            said.put("signal", int(message["signal"]))
        elif op == "end-descendants":
            ending = asyncio.create_task(self._end_descendants(message))
            self._ending.add(ending)
            ending.add_done_callback(self._ending.discard)

    async def _end_descendants(self, message: dict[str, Any]) -> None:
        """Answer an `end-descendants` once its child's shim ended them (0: the child, or
        its actor, is gone: its end ends them)."""
        count = 0
        if (actor := self._actors.get(message["id"])) is not None:
            try:
                age = message.get("ageTicks")
                count = await actor.end_descendants.remote(float(message["graceS"]), age)
            except (RayActorError, RayTaskError):
                count = 0
        reply = {"event": "descendants-ended", "id": message["id"], "req": message["req"]}
        self.send({**reply, "count": count})

    def _new_actor(self, placement: Placement) -> tuple[Any, str]:
        self._made += 1
        name = f"{self._names}-{self._made}"
        return RemoteChildActor.options(name=name, **_options(placement)).remote(), name

    def warm_up(self) -> None:
        """Start the actors the first children without a placement will take."""
        nowhere = Placement()
        self._warm[_key(nowhere)] = [self._new_actor(nowhere) for _ in range(WARM_ACTORS)]

    def _actor_for(self, placement: Placement) -> tuple[Any, str, bool]:
        """An actor for one child: a warm one when its placement keeps some (then one
        more is started for the next), else a new one. True: it was warm."""
        if placement.resources:
            return (*self._new_actor(placement), False)  # would hold them while idle
        warm = self._warm.setdefault(_key(placement), [])
        taken = warm.pop() if warm else None  # the newest: a returned one is surely up
        while len(warm) < WARM_ACTORS:
            warm.append(self._new_actor(placement))
        return (*taken, True) if taken is not None else (*self._new_actor(placement), False)

    async def _run(self, message: dict[str, Any]) -> None:
        child_id = message["id"]
        placement = placement_of(message.get("placement"))
        actor, name, warm = self._actor_for(placement)
        self._actors[child_id] = actor
        ended = False
        try:
            try:
                ended = await self._carry(child_id, actor, name, message)
            except (ActorDiedError, ActorUnavailableError, RayActorError):
                if not warm or child_id in self._started:
                    raise
                # A warm actor lost while it waited (its node went): a new one, once.
                ray.kill(actor, no_restart=True)
                actor, name = self._new_actor(placement)
                self._actors[child_id] = actor
                ended = await self._carry(child_id, actor, name, message)
        except (ActorDiedError, ActorUnavailableError, RayActorError) as exc:
            self.send({"event": "failed", "id": child_id, "reason": NODE_LOST, "message": str(exc)})
        finally:
            self._started.discard(child_id)
            self._actors.pop(child_id, None)
            self._flowing.pop(child_id, None)
            self._inputs.pop(child_id, None)
            idle = None if placement.resources else self._warm.get(_key(placement))
            if ended and idle is not None and len(idle) < IDLE_ACTORS:
                idle.append((actor, name))  # nothing of its child is left: it takes another
            else:
                ray.kill(actor, no_restart=True)

    async def _carry(self, child_id: int, actor: Any, name: str, message: dict[str, Any]) -> bool:
        """See one child through on its actor; True once it exited with nothing of its
        tree left (else it never started: the failure was sent)."""
        start = actor.start.remote(message)
        try:
            started = await asyncio.wait_for(start, float(message["placementTimeoutS"]))
        except (TimeoutError, GetTimeoutError):
            placement = json.dumps(message.get("placement") or {})
            self.send(
                {
                    "event": "failed",
                    "id": child_id,
                    "reason": UNPLACEABLE,
                    "message": f"no node of the cluster took the placement {placement} "
                    f"within {message['placementTimeoutS']:g} s",
                }
            )
            return False
        except RayTaskError as exc:
            cause = exc.as_instanceof_cause()
            self.send(
                {"event": "failed", "id": child_id, "reason": SPAWN_FAILED, "message": str(cause)}
            )
            return False
        self._started.add(child_id)
        self.send({"event": "started", "id": child_id, "actor": name, **started})
        flowing = self._flowing[child_id]
        feeding = asyncio.create_task(_feed(actor, self._inputs[child_id]))
        # Known once nothing of its tree is left, whether or not its output was all taken.
        gone: asyncio.Future[dict[str, Any]] = asyncio.ensure_future(actor.exit.remote())
        try:
            async for ref in actor.output.remote():
                stream, data = await ref
                self.send(
                    {"event": "output", "id": child_id, "stream": stream, "bytes": len(data)},
                    data,
                )
                if not flowing.is_set() and not gone.done():
                    await _until_either(flowing, gone)
            ended = await gone
        finally:
            feeding.cancel()  # what its child did not take yet comes to nothing
            _settle(gone)
        self.send({"event": "exit", "id": child_id, **ended})
        return True

    async def close(self) -> None:
        """The server is gone: kill every actor (the shims end the trees)."""
        idle = [actor for warm in self._warm.values() for actor, _ in warm]
        for actor in [*self._actors.values(), *idle]:
            ray.kill(actor, no_restart=True)
        for task in [*self._tasks.values(), *self._ending]:
            task.cancel()
        await asyncio.gather(*self._tasks.values(), *self._ending, return_exceptions=True)


async def _until_either(flowing: asyncio.Event, gone: asyncio.Future[Any]) -> None:
    """Wait while a child's output is paused (the actor's generator stops CHUNKS_AHEAD
    chunks on), but no longer than its tree lives: what is left of its output is then
    bounded, and its end must not wait for a client that does not read."""
    resumed = asyncio.ensure_future(flowing.wait())
    try:
        await asyncio.wait({resumed, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        resumed.cancel()


def _settle(gone: asyncio.Future[Any]) -> None:
    """A child's end no longer awaited (its output failed first): called off, or its
    failure taken, so that nothing is left unretrieved."""
    if not gone.done():
        gone.cancel()
    elif not gone.cancelled():
        gone.exception()


def _key(placement: Placement) -> str:
    """The placement as the warm actors are kept by: its canonical JSON."""
    return json.dumps(placement_message(placement), sort_keys=True)


def _options(placement: Placement) -> dict[str, Any]:
    """Ray's options for the actor of a child placed so: the node's resources it holds, the
    one node it must run on, the labels that node must carry."""
    options: dict[str, Any] = {}
    if placement.resources:
        options["resources"] = placement.resources
    if placement.node_id:
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
            placement.node_id, soft=False
        )
    if placement.labels:
        options["label_selector"] = placement.labels
    return options


def _probe(address: str) -> str | None:
    """Why the head at `HOST:PORT` cannot be reached (None: it answers, or `auto`)."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit():
        return None  # `auto`, or a form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return f"the head at {address} does not answer: {exc.strerror or exc}"
    return None


async def serve(bridge: Bridge) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        while line := await reader.readline():
            message = json.loads(line)
            # An input's bytes follow its line, as they are.
            size = int(message.get("bytes", 0))
            bridge.handle(message, await reader.readexactly(size) if size else b"")
    except asyncio.IncompleteReadError:  # the server went in the middle of an input
        pass
    finally:
        await bridge.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="subagent_host.executors.ray_bridge")
    parser.add_argument("--address", default="auto")
    parser.add_argument("--namespace")
    args = parser.parse_args(argv)
    bridge = Bridge()
    if (unreachable := _probe(args.address)) is not None:
        bridge.send({"event": "unreachable", "message": unreachable})
        return EXIT_UNREACHABLE
    try:
        ray.init(
            address=args.address,
            namespace=args.namespace,
            log_to_driver=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        bridge.send({"event": "unreachable", "message": str(exc)})
        return EXIT_UNREACHABLE
    try:
        bridge.send({"event": "ready", "node": ray.get_runtime_context().get_node_id()})
        bridge.warm_up()
        asyncio.run(serve(bridge))
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
