"""Which program an agent child runs: the file exec would start, its digest, its version.

A launch records this identity with its projection, and a resume refuses when the
file it would start now is another one (protocol.md §15). The file is the one
exec would find (the name on the child's PATH, or a path relative to its working
directory), symlinks followed; its digest is `sha256:v1:` and the SHA-256 of its
bytes; its version is what `--version` prints, asked once per file content.

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

from subagent_host.backends.probe import VersionProbes, find_executable
from subagent_host.backends.sessions import file_digest
from subagent_host.values import DIGEST_PREFIX
from subagent_host.values.facts import Executable

_FileKey = tuple[str, int, int, int, int, int]


class ProgramIdentities:
    """Resolves, hashes and asks the version of agent CLIs; hashes kept per file identity."""

    def __init__(self, probes: VersionProbes | None) -> None:
        self._probes = probes
        self._digests: dict[_FileKey, str] = {}

    async def identify(self, program: str, cwd: str, path: str | None) -> Executable | None:
        """What `program` is for a child in `cwd` with `path` as its PATH; None when exec
        would find no such file (the launch then fails on its own)."""
        found = await self.locate(program, cwd, path)
        if found is None:
            return None
        return attrs.evolve(found, version=await self.version(found))

    async def locate(self, program: str, cwd: str, path: str | None) -> Executable | None:
        """The file and its digest, without its version: nothing is run."""
        return await asyncio.to_thread(self._hash, program, cwd, path)

    async def version(self, found: Executable) -> str | None:
        """What that file's `--version` prints (asked once per path and content)."""
        if self._probes is None:
            return None
        # Keyed by content: the same file is asked once; a replaced one again.
        return await self._probes.version(found.path, key=f"{found.path}\0{found.digest}")

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
