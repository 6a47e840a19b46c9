"""Which program an agent child runs: the file exec would start, its digest, its version.

A launch records this identity with its projection, and a resume refuses when the
file it would start now is another one (protocol.md §15). The file is the one
exec would find (the name on the child's PATH, or a path relative to its working
directory), symlinks followed; its digest is `sha256:v1:` and the SHA-256 of its
bytes; its version is what `--version` prints, asked once per file content.

A configured ACP agent is never run with `--version`: an arbitrary program need not
know the option, and one may take it for its ACP mode and wait on its stdin until the
probe's bound. Its version is the `agentInfo.version` it answered to the server's
`initialize` probe (backends/acp_probe.py), and only when the file that answered is the
child's program: none when the probe found another file, or the agent gave none.

An agent CLI can be a large file (a native binary of hundreds of megabytes), so a
digest is kept per file identity (device, inode, size, modification and change
times): writing to the file, or putting another file at its path, changes that
identity, and the file is read again.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import attrs

from subagent_host.backends.acp_probe import AcpProbes
from subagent_host.backends.probe import VersionProbes, find_executable
from subagent_host.backends.sessions import file_digest
from subagent_host.values import DIGEST_PREFIX
from subagent_host.values.facts import Executable

_FileKey = tuple[str, int, int, int, int, int]


class ProgramIdentities:
    """Resolves, hashes and asks the version of agent CLIs; hashes kept per file identity."""

    def __init__(self, probes: VersionProbes | None, acp: AcpProbes | None = None) -> None:
        self._probes = probes
        self._acp = acp
        self._digests: dict[_FileKey, str] = {}

    async def identify(
        self, program: str, cwd: str, path: str | None, *, acp_agent: str | None = None
    ) -> Executable | None:
        """What `program` is for a child in `cwd` with `path` as its PATH; None when exec
        would find no such file (the launch then fails on its own). `acp_agent`: the
        configured ACP backend the program is (None: an agent CLI)."""
        found = await self.locate(program, cwd, path)
        if found is None:
            return None
        return attrs.evolve(found, version=await self.version(found, acp_agent=acp_agent))

    async def locate(self, program: str, cwd: str, path: str | None) -> Executable | None:
        """The file and its digest, without its version: nothing is run."""
        return await asyncio.to_thread(self._hash, program, cwd, path)

    async def version(self, found: Executable, *, acp_agent: str | None = None) -> str | None:
        """What that file's `--version` prints (asked once per path and content); for the
        ACP backend `acp_agent`, the version it answered `initialize` with."""
        if acp_agent is not None:
            return await self._acp_version(acp_agent, found)
        if self._probes is None:
            return None
        # Keyed by content: the same file is asked once; a replaced one again.
        return await self._probes.version(found.path, key=f"{found.path}\0{found.digest}")

    async def _acp_version(self, name: str, found: Executable) -> str | None:
        """The `agentInfo.version` of the ACP agent `name` (its probe waited for), when the
        file that answered is `found`; None otherwise. Nothing is run here."""
        probe = await self._acp.probe(name) if self._acp is not None else None
        if probe is None or probe.answer is None or probe.path != found.path:
            return None
        info = probe.answer.agent_info
        return info.version if info is not None else None

    def _hash(self, program: str, cwd: str, path: str | None) -> Executable | None:
        located = find_executable(program, cwd, path)
        if located is None:
            return None
        real = os.path.realpath(located)
        try:
            info = os.stat(real)
            key = (real, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
            digest = self._digests.get(key)
            if digest is None:
                digest = file_digest(Path(real), DIGEST_PREFIX)
                self._digests[key] = digest
        except OSError:
            return None
        return Executable(path=real, digest=digest)
