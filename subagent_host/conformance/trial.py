"""One case's run: its temporary directory, the servers it starts, the processes it
learns of, and the clean-up that leaves none of them behind whatever happened."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Final

import attrs

from subagent_host.conformance import processes
from subagent_host.conformance.connection import Connection
from subagent_host.conformance.mismatch import FramingName, Mismatch
from subagent_host.conformance.schema import Validator

# A server given end of input answers what it read, stops its runs (their grace) and
# exits; past this it is taken for hung and SIGKILLed.
EXIT_TIMEOUT_S: Final = 10.0
# A value in the server's environment that no child may see (§8.3, the allowlist).
PROBE_VARIABLE: Final = "SUBAGENT_HOST_CONFORMANCE_PROBE"
PROBE_VALUE: Final = "must-not-reach-children"


@attrs.define(eq=False)
class Trial:
    """What a case body works with."""

    server_command: tuple[str, ...] = attrs.field(alias="server")
    framing: FramingName
    dir: Path = attrs.field(alias="directory")
    validator: Validator
    reply_timeout: float
    connections: list[Connection] = attrs.field(init=False, factory=list)
    learnt: list[processes.Pid] = attrs.field(init=False, factory=list)
    """Processes of the case's runs."""
    notes: list[str] = attrs.field(init=False, factory=list)

    def __attrs_post_init__(self) -> None:
        for place in (self.project, self.config_home):
            place.mkdir(parents=True, exist_ok=True)

    @property
    def state_dir(self) -> Path:
        return self.dir / "state"

    @property
    def project(self) -> Path:
        return self.dir / "project"

    @property
    def config_home(self) -> Path:
        return self.dir / "config"

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The server's environment: ours, without delegation depth or a user's config."""
        env = {k: v for k, v in os.environ.items() if k != "SUBAGENT_HOST_DEPTH"}
        env["XDG_CONFIG_HOME"] = str(self.config_home)
        env[PROBE_VARIABLE] = PROBE_VALUE
        env.update(extra or {})
        return env

    async def start(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        state_dir: Path | None = None,
    ) -> Connection:
        """Start the server under test with this case's state directory (§7)."""
        proc = await asyncio.create_subprocess_exec(
            *self.server_command,
            "--state-dir",
            str(state_dir or self.state_dir),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.environment(env),
            cwd=self.project,
            limit=64 * 1024 * 1024,  # a status {since} reply may be megabytes on one line
            start_new_session=True,  # our signals (a Ctrl-C) reach the server only via us
        )
        connection = Connection(proc, self.framing, self.validator, self.reply_timeout)
        self.connections.append(connection)
        return connection

    async def learn_pids(self, path: Path, count: int) -> list[processes.Pid]:
        """The pids a case's command wrote to `path` (at least `count` of them)."""
        try:
            async with asyncio.timeout(self.reply_timeout):
                while True:
                    words = written_words(path)
                    if len(words) >= count:
                        break
                    await asyncio.sleep(0.02)  # a file has no event to await
        except TimeoutError:
            raise Mismatch(f"the child to write {count} pids to {path}", "none") from None
        found = []
        for word in words:
            pid = processes.identify(int(word))
            if pid is not None:
                found.append(pid)
                self.learnt.append(pid)
        if len(found) < count:
            raise Mismatch(f"{count} live processes named in {path}", " ".join(words))
        return found

    async def clean_up(self) -> list[str]:
        """End everything the case started; say what had to be ended by force."""
        forced: list[str] = []
        for connection in self.connections:
            below = processes.descendants(connection.pid)
            code = connection.proc.returncode
            if code is None:
                code = await connection.finish(EXIT_TIMEOUT_S)
            if code is None:
                forced.append(f"server {connection.pid} did not exit at end of input")
                connection.proc.send_signal(signal.SIGKILL)  # the process this case started
                await connection.wait_exit(EXIT_TIMEOUT_S)
            for process in below:
                if processes.alive(process):
                    processes.kill(process)
            await connection.stop_reading()
        for process in self.learnt:
            if processes.alive(process):
                forced.append(f"pid {process.pid} was still alive")
                processes.kill(process)
        return forced


def written_words(path: Path) -> list[str]:
    """The words of a file its writer has finished a line of, else none."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return text.split() if text.endswith("\n") else []
