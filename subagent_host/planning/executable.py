"""Which file an agent child's program is, for its launch projection (protocol.md §15).

The program is the one its prepared launch names (`argv[0]`: the backend's
executable, as configured), found as exec would find it: on the child's PATH
(its `env` PATH when it gives one, else the server's), or relative to its working
directory. A `command` child's program is its own argv, kept in its projection. A
configured ACP agent's version is the one it answered the server's probe with.
"""

from __future__ import annotations

from collections.abc import Mapping

from subagent_host.backends.base import Backend
from subagent_host.backends.identity import ProgramIdentities
from subagent_host.planning.plan import ChildPlan, prepared
from subagent_host.values.choices import ACP
from subagent_host.values.facts import Executable


async def identify_child(
    child: ChildPlan, backend: Backend, identities: ProgramIdentities | None
) -> Executable | None:
    """The agent child's program, digest and version; None for a `command` child, or when
    nothing identifies programs (or exec would find none: the launch then fails itself)."""
    if identities is None or child.command is not None:
        return None
    program = prepared(child, backend).argv[0]
    acp_agent = backend.id if backend.protocol == ACP else None
    return await identities.identify(program, child.cwd, child.env.get("PATH"), acp_agent=acp_agent)


async def identify_children(
    children: tuple[ChildPlan, ...],
    backends: Mapping[str, Backend],
    identities: ProgramIdentities | None,
) -> tuple[Executable | None, ...]:
    """`identify_child` for each child, in order."""
    return tuple(
        [await identify_child(child, backends[child.backend], identities) for child in children]
    )
