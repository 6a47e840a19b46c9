"""The backends a server can run, and what is known of their CLIs (for ping and preflight).

Handlers are given this, not the adapters' package: they ask it what can run
here, and hand it to planning, which knows the adapters.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from subagent_host.backends.base import Backend
from subagent_host.backends.probe import VersionProbes
from subagent_host.backends.tested_versions import TESTED_VERSIONS
from subagent_host.values.facts import BackendInfo


@attrs.define
class Toolchain:
    adapters: Mapping[str, Backend] = attrs.field(factory=dict)
    """The backends that can run here, by id."""
    probes: VersionProbes | None = None
    """Agent CLI versions (`--version`, probed once each, in the background)."""
    server_env: Mapping[str, str] = attrs.field(factory=dict)
    """The server's environment, which children get the allowed part of: where a receipt
    finds each agent CLI's provider endpoint (planning/egress.py)."""
    _described: tuple[int, tuple[BackendInfo, ...]] | None = attrs.field(
        default=None, init=False, repr=False, eq=False
    )
    """The last `describe()`, with the probes' `ended` count it was made at."""

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self.adapters)

    def describe(self) -> tuple[BackendInfo, ...]:
        """Each backend, by id: can it run here? No file system work (ping is answered
        inline): an agent CLI must have been on the server's PATH when it started (a
        spawn may still give its own PATH in `env`).

        Made again only once a version probe has ended (the only thing that changes
        it: a program is located once), so `ping` answers from the same tuple.
        """
        ended = self.probes.ended if self.probes is not None else 0
        if self._described is None or self._described[0] != ended:
            backends = tuple(self._describe(name) for name in sorted(self.adapters))
            self._described = (ended, backends)
        return self._described[1]

    def _describe(self, name: str) -> BackendInfo:
        program = self.adapters[name].executable
        tested = TESTED_VERSIONS.get(name)
        if not program or self.probes is None:
            return BackendInfo(id=name, available=True, tested_version=tested)
        if self.probes.locate(program):
            version = self.probes.cached(program)
            return BackendInfo(id=name, available=True, version=version, tested_version=tested)
        return BackendInfo(
            id=name,
            available=False,
            reason=f"{program!r} is not on the server's PATH",
            tested_version=tested,
        )
