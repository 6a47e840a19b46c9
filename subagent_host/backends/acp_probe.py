"""What each configured ACP agent says of itself: started once, asked `initialize`, ended.

A configured ACP backend (backends/acp.py) is an arbitrary program: whether it is
there, answers at all, speaks ACP version 1, and what it declares (`agentInfo`,
`agentCapabilities.loadSession`, …) is known only by asking it. Each is asked once
per server, in the background from its start (like the CLIs' `--version`,
backends/probe.py), and what it answered is kept: `ping`, `initialize` and
`agents/list` list it, a preflight reports its version, a launch of an agent that
cannot run and a resume of one that cannot load a session are refused.

The probe is the agent's configured launch (executable, args, env over the
children's allowlist of the server's environment) in the server's working
directory, started by the supervisor like every child (so its orphan reaping and
cgroups hold), with stdin kept open and the `initialize` line the conversation
writes (backends/interactive/acp_client.py). The first answer to it, or the
agent's exit, or PROBE_TIMEOUT_S, whichever comes first, ends the probe; its
whole tree is then ended (SIGTERM, PROBE_GRACE_S, SIGKILL), also when the server
exits while it runs (`close`). The answer is read with the SDK's model, imported
off the loop the first time (a server that names no ACP agent never imports it).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any, Final

import attrs

from subagent_host.backends.acp import AcpAnswer, AcpBackend
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.probe import find_executable
from subagent_host.backends.reports import short
from subagent_host.backends.supervisor import Child, LaunchSpec, Supervisor

PROBE_TIMEOUT_S: Final = 15.0
"""The most an agent may take to answer `initialize` (Qwen Code takes about a second)."""
PROBE_GRACE_S: Final = 1.0
"""Between SIGTERM and SIGKILL when the probe ends the agent's tree."""
ACP_VERSION: Final = 1
"""The ACP version the client speaks (acp_client.PROTOCOL_VERSION, without its import)."""
REQUEST_ID: Final = 0
ANSWER_BYTES: Final = 1024 * 1024
"""The most of stdout read for the answer: an `initialize` answer is a few hundred bytes."""
STDERR_TAIL_BYTES: Final = 2000
"""How much of the end of its stderr is kept, for the reason it exited."""


@attrs.frozen
class AcpProbe:
    """One agent's probe: what it answered, or why it cannot run."""

    found: bool
    """Whether its executable was found on the server's PATH (or at its path)."""
    answer: AcpAnswer | None = None
    """Its answer, when it gave one in ACP's shape (also one in another version)."""
    reason: str | None = None
    """Why it cannot run as an ACP backend (None: it answered version 1)."""
    path: str | None = None
    """The real path of the file that answered (None: none did): a child's program has the
    version it answered only when it is that file (backends/identity.py)."""

    @property
    def runs(self) -> bool:
        return self.reason is None


class _Reader:
    """The agent's output as it comes: its answer to our request, and its stderr's tail."""

    def __init__(self) -> None:
        self.answer: asyncio.Future[dict[str, Any] | str] = (
            asyncio.get_running_loop().create_future()
        )
        """The answer's `result`, or (a str) why there is no answer to read."""
        self._stdout = bytearray()
        self._read = 0
        self.stderr = b""

    def on_stdout(self, data: bytes) -> None:
        if self.answer.done():
            return
        self._read += len(data)
        self._stdout += data
        while b"\n" in self._stdout and not self.answer.done():
            line, _, rest = bytes(self._stdout).partition(b"\n")
            self._stdout = bytearray(rest)
            self._on_line(line)
        if not self.answer.done() and self._read > ANSWER_BYTES:
            self.answer.set_result(f"it printed over {ANSWER_BYTES} bytes without answering")

    def on_stderr(self, data: bytes) -> None:
        self.stderr = (self.stderr + data)[-STDERR_TAIL_BYTES:]

    def _on_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            printed = line.decode("utf-8", "replace")
            self.answer.set_result(f"it printed a line that is not a JSON object: {short(printed)}")
            return
        if message.get("id") != REQUEST_ID or "method" in message:
            return  # a notification or a request of its own: not the answer
        error = message.get("error")
        if error is not None:
            text = error.get("message") if isinstance(error, dict) else None
            self.answer.set_result(f"it refused initialize: {short(str(text or error), 300)}")
            return
        result = message.get("result")
        self.answer.set_result(result if isinstance(result, dict) else {})


class AcpProbes:
    """Each configured ACP agent's probe, once per server (see the module's docstring)."""

    def __init__(
        self,
        supervisor: Supervisor,
        env: Mapping[str, str],
        timeout_s: float = PROBE_TIMEOUT_S,
    ) -> None:
        self._supervisor = supervisor
        self._env = dict(env)
        self._timeout_s = timeout_s
        self._probes: dict[str, asyncio.Task[AcpProbe]] = {}
        self.ended = 0
        """How many probes have ended: what `cached` answers changes only when this does."""

    def start(self, backends: Iterable[AcpBackend]) -> None:
        """Probe each agent in the background."""
        for backend in backends:
            if backend.id not in self._probes:
                self._probes[backend.id] = asyncio.ensure_future(self._probe(backend))

    def configured(self, name: str) -> bool:
        return name in self._probes

    def cached(self, name: str) -> AcpProbe | None:
        """The agent's probe, once it ended (None while it runs, or for another backend)."""
        task = self._probes.get(name)
        if task is None or not task.done() or task.cancelled() or task.exception():
            return None
        return task.result()

    async def probe(self, name: str) -> AcpProbe | None:
        """The agent's probe, waited for (bounded by its timeout); None for a backend that
        is not a configured ACP agent, or once the server is closing."""
        task = self._probes.get(name)
        if task is None:
            return None
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():  # the server is closing: nothing is known
                return None
            raise  # the caller itself was cancelled
        except Exception:  # a bug in the probe: said as unknown, never a request's error
            return None

    async def close(self) -> None:
        """End the probes still running, and the agents they started."""
        for task in self._probes.values():
            task.cancel()
        await asyncio.gather(*self._probes.values(), return_exceptions=True)

    async def _probe(self, backend: AcpBackend) -> AcpProbe:
        try:
            return await self._ask(backend)
        finally:
            # In the step that ends the task, so no one sees it done with the old count.
            self.ended += 1

    async def _ask(self, backend: AcpBackend) -> AcpProbe:
        env = {**self._env, **backend.env}
        cwd = os.getcwd()
        program = backend.executable
        located = find_executable(program, cwd, env.get("PATH"))
        if located is None:
            return AcpProbe(found=False, reason=f"{program!r} is not on the server's PATH")
        client = await asyncio.to_thread(_client)  # the SDK's import, off the loop
        reader = _Reader()
        spec = LaunchSpec(
            argv=(program, *backend.args),
            cwd=cwd,
            env=env,
            stdin=client.initialize_line(REQUEST_ID),
            keep_stdin=True,
            name=f"acp-probe-{backend.id}",
        )
        try:
            child = await self._supervisor.start(spec, reader)
        except OSError as exc:
            return AcpProbe(found=True, reason=f"{program!r} cannot be started: {exc}")
        exited = asyncio.ensure_future(self._supervisor.wait(child))
        try:
            either: set[asyncio.Future[Any]] = {reader.answer, exited}
            done, _ = await asyncio.wait(
                either, timeout=self._timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            await asyncio.shield(self._end(child, exited))
        if not reader.answer.done():
            if not done:
                return AcpProbe(
                    found=True,
                    reason=f"no answer to initialize within {self._timeout_s:g} s",
                )
            return AcpProbe(found=True, reason=_exited(exited.result(), reader.stderr))
        probe = _read(client, reader.answer.result())
        if probe.answer is None:
            return probe
        return attrs.evolve(probe, path=await asyncio.to_thread(os.path.realpath, located))

    async def _end(self, child: Child, exited: asyncio.Future[Any]) -> None:
        """End the agent's whole tree, graceful then forced, and wait for its end."""
        if not exited.done():
            await self._supervisor.stop(child, grace_s=PROBE_GRACE_S)
        await exited


def _exited(status: ProcessExit, stderr: bytes) -> str:
    """Why an agent that exited before answering cannot run: its status and stderr's end."""
    how = f"status {status.exit_code}" if status.signal is None else f"signal {status.signal}"
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    tail = short(" / ".join(lines[-3:]), 300) if lines else "nothing"
    return f"it exited ({how}) before answering initialize; its stderr ended: {tail}"


def _client() -> ModuleType:
    """The conversation's module (the SDK and pydantic with it), imported on first use."""
    from subagent_host.backends.interactive import acp_client

    return acp_client


def _read(client: ModuleType, answer: dict[str, Any] | str) -> AcpProbe:
    """The probe of an agent that printed `answer` (a result, or why there is none)."""
    if isinstance(answer, str):
        return AcpProbe(found=True, reason=answer)
    import pydantic  # loaded with the client's module already

    try:
        read = client.read_initialize(answer)
    except pydantic.ValidationError as error:
        return AcpProbe(
            found=True, reason=f"its answer to initialize is not ACP's: {short(str(error), 300)}"
        )
    if read.protocol_version != ACP_VERSION:
        return AcpProbe(
            found=True,
            answer=read,
            reason=f"it speaks ACP version {read.protocol_version}, not {ACP_VERSION}",
        )
    return AcpProbe(found=True, answer=read)
