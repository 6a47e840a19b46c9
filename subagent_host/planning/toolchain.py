"""The backends a server can run, and what is known of their CLIs (for ping and preflight).

Handlers are given this, not the adapters' package: they ask it what can run
here, and hand it to planning, which knows the adapters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from subagent_host.backends.acp_probe import AcpProbe, AcpProbes
from subagent_host.backends.base import Backend
from subagent_host.backends.probe import VersionProbes
from subagent_host.backends.tested_versions import ACP_TESTED_VERSIONS, TESTED_VERSIONS
from subagent_host.values.choices import ACP
from subagent_host.values.facts import BackendInfo

RESUME_UNSUPPORTED: Final = "resume-unsupported"


@attrs.define
class Toolchain:
    adapters: Mapping[str, Backend] = attrs.field(factory=dict)
    """The backends that can run here, by id."""
    probes: VersionProbes | None = None
    """Agent CLI versions (`--version`, probed once each, in the background)."""
    server_env: Mapping[str, str] = attrs.field(factory=dict)
    """The server's environment, which children get the allowed part of: where a receipt
    finds each agent CLI's provider endpoint (planning/egress.py)."""
    acp: AcpProbes | None = None
    """What each configured ACP agent answered to `initialize` (probed once each, in the
    background)."""
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
        ended += self.acp.ended if self.acp is not None else 0
        if self._described is None or self._described[0] != ended:
            backends = tuple(self._describe(name) for name in sorted(self.adapters))
            self._described = (ended, backends)
        return self._described[1]

    def acp_backends(self) -> tuple[BackendInfo, ...]:
        """The configured ACP agents, as `describe()` lists them."""
        return tuple(info for info in self.describe() if info.protocol == ACP)

    async def acp_probe(self, name: str) -> AcpProbe | None:
        """What the ACP agent `name` answered (waited for); None for another backend."""
        return await self.acp.probe(name) if self.acp is not None else None

    async def resume_refusal(self, name: str) -> str | None:
        """Why a child of backend `name` cannot be resumed, where its agent said so: an
        ACP agent that does not declare `loadSession`."""
        probe = await self.acp_probe(name)
        if probe is None or probe.answer is None or probe.answer.capabilities.load_session:
            return None
        return f"the ACP agent {name!r} does not declare loadSession: it cannot continue a session"

    async def unavailable(self, name: str) -> str | None:
        """Why the ACP agent `name` cannot run, where its probe found it but it did not
        answer as one (a missing program is the launch's own check, on the child's PATH)."""
        probe = await self.acp_probe(name)
        if probe is None or not probe.found or probe.runs:
            return None
        return f"the {name} backend cannot run: {probe.reason}"

    def _describe(self, name: str) -> BackendInfo:
        if self.acp is not None and self.acp.configured(name):
            return self._describe_acp(name, self.acp)
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

    def _describe_acp(self, name: str, acp: AcpProbes) -> BackendInfo:
        """A configured ACP agent: available once it answered (and while it is being asked,
        when its program was found), with what it answered."""
        probe = acp.cached(name)
        if probe is None:
            program = self.adapters[name].executable
            found = self.probes is None or self.probes.locate(program) is not None
            reason = None if found else f"{program!r} is not on the server's PATH"
            return BackendInfo(id=name, available=found, reason=reason, protocol=ACP)
        answer = probe.answer
        info = answer.agent_info if answer is not None else None
        return BackendInfo(
            id=name,
            available=probe.runs,
            version=info.version if info is not None else None,
            reason=probe.reason,
            protocol=ACP,
            protocol_version=answer.protocol_version if answer is not None else None,
            agent_info=info,
            # The tested version of the agent it says it is, whatever it is named here.
            tested_version=ACP_TESTED_VERSIONS.get(info.name) if info is not None else None,
            agent_capabilities=answer.capabilities if answer is not None else None,
            auth_methods=answer.auth_methods if answer is not None else None,
        )
