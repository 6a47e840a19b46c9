"""`agents/list`: the agent definitions `spawn {agent}` can use, and what is wrong with the rest.

Definitions are read afresh on every call (the user's config directory, then a
trusted project's `.pi/`), each listed with the model, effort, tools and mode a
spawn of it would run with today (profiles and configuration defaults applied).
Diagnostics cover the definitions that cannot be used and the configuration
files' problems.
"""

from __future__ import annotations

from subagent_host.agents.effective import effective
from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.wire import AgentInfo, AgentsListParams, AgentsListResult
from subagent_host.values.facts import Diagnostic


async def handle(_params: AgentsListParams, ctx: HandlerContext) -> AgentsListResult:
    catalog = await ctx.agent_catalog()
    settings = ctx.config.settings
    agents = []
    for definition in sorted(catalog.agents.values(), key=lambda d: d.key):
        wanted = effective(definition, settings)
        agents.append(
            AgentInfo(
                name=definition.name,
                description=definition.description,
                source=definition.source,
                path=definition.path,
                digest=definition.digest,
                model=wanted.model,
                effort=wanted.effort,
                tools=wanted.tools,
                mode=wanted.mode,
            )
        )
    diagnostics = [Diagnostic(d.severity, d.code, d.message, d.path) for d in catalog.diagnostics]
    diagnostics += [Diagnostic(d.severity, d.code, d.message, d.file) for d in settings.diagnostics]
    return AgentsListResult(agents=tuple(agents), diagnostics=tuple(diagnostics))
