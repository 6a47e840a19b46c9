"""What `preflight` adds to a checked launch: each child's program probed, and receipts
naming each agent CLI's version and its provider's endpoint.

Nothing starts here but the CLIs' `--version` probes (once per program, cached by
`VersionProbes`); a configured ACP agent's version is what it answered to `initialize`
(`AcpProbes`, started with the server).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import attrs

from subagent_host.backends.base import Backend
from subagent_host.backends.probe import find_executable
from subagent_host.planning.egress import plan_egress
from subagent_host.planning.plan import LaunchPlan, ServerLimits, prepared
from subagent_host.planning.receipts import receipts
from subagent_host.planning.toolchain import Toolchain
from subagent_host.planning.views import Access, Receipts
from subagent_host.values.facts import Diagnostic


def probe(plan: LaunchPlan, backends: Mapping[str, Backend]) -> list[Diagnostic]:
    """Each child's program must exist and be executable where the child would look."""
    found: list[Diagnostic] = []
    for index, child in enumerate(plan.children):
        program = prepared(child, backends[child.backend]).argv[0]
        if find_executable(program, child.cwd, child.env.get("PATH")) is None:
            where = "in its working directory" if "/" in program else "on the child's PATH"
            found.append(
                Diagnostic(
                    "error",
                    "executable-not-found",
                    f"{program!r} is not an executable file {where}",
                    f"children[{index}]" if len(plan.children) > 1 else "command",
                )
            )
    return found


async def unavailable_agents(plan: LaunchPlan, toolchain: Toolchain) -> list[Diagnostic]:
    """`backend-unavailable` for each child of an ACP agent whose probe found it unable to
    run (it exited, gave no answer, or not ACP's), with the probe's reason."""
    found: list[Diagnostic] = []
    for index, child in enumerate(plan.children):
        reason = await toolchain.unavailable(child.backend)
        if reason is not None:
            where = f"children[{index}]" if len(plan.children) > 1 else "backend"
            found.append(Diagnostic("error", "backend-unavailable", reason, where))
    return found


async def versioned_receipts(
    plan: LaunchPlan, toolchain: Toolchain, limits: ServerLimits
) -> Receipts:
    """The plan's receipts, each agent child's with its CLI's version (None: it gave none)
    and its provider's endpoint where one is named."""
    backends, probes = toolchain.adapters, toolchain.probes
    described = receipts(plan, backends, plan.access or Access(), limits)
    # Off the loop: finding an endpoint reads the CLIs' configuration files.
    egress = await asyncio.to_thread(plan_egress, plan, backends, toolchain.server_env)
    children = []
    for entry, child, out in zip(described.access.children, plan.children, egress, strict=True):
        entry = attrs.evolve(entry, egress=out)
        program = backends[child.backend].executable
        acp = await toolchain.acp_probe(child.backend)
        if acp is not None:  # an ACP agent's version is the one it answered with
            info = acp.answer.agent_info if acp.answer is not None else None
            entry = attrs.evolve(entry, version=info.version if info is not None else None)
        elif program and probes is not None:
            entry = attrs.evolve(entry, version=await probes.version(program))
        children.append(entry)
    access = attrs.evolve(described.access, children=tuple(children))
    return attrs.evolve(described, access=access)
