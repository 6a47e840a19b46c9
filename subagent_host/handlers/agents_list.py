"""`agents/list`: the agent definitions `spawn {agent}` can use, and what is wrong with the rest.

Definitions are read afresh on every call (the user's config directory, then a
trusted project's `.pi/`), each listed with the model, effort, tools, mode and backend
a spawn of it would run with today (profiles and configuration defaults applied).
Those the configuration's `agents` lists disable are left out, or with `all: true`
listed with `disabled` saying which list of which file. Diagnostics cover the
definitions that cannot be used and the configuration files' problems. The agents
configured as ACP backends are listed beside them (`backends`), as `ping` lists them.
"""

from __future__ import annotations

from subagent_host.agents.effective import effective
from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.wire import AgentDisabledInfo, AgentInfo, AgentsListParams, AgentsListResult
from subagent_host.values import Mode
from subagent_host.values.choices import member
from subagent_host.values.copying import shared
from subagent_host.values.facts import Diagnostic


async def handle(params: AgentsListParams, ctx: HandlerContext) -> AgentsListResult:
    catalog = await ctx.agent_catalog()
    settings = ctx.config.settings
    agents = []
    for definition in sorted(catalog.agents.values(), key=lambda d: d.key):
        disabled = settings.agents.disabled_by(definition.name)
        if disabled is not None and not params.all_:
            continue
        wanted = effective(definition, settings)
        agents.append(
            shared(  # the definition's name, description, source, path, digest; what it gets
                AgentInfo,
                definition,
                model=wanted.model,
                effort=wanted.effort,
                tools=wanted.tools,
                mode=member(Mode, wanted.mode),
                backend=definition.backend or settings.default_backend,
                disabled=None
                if disabled is None
                else AgentDisabledInfo(disabled.by, disabled.file, disabled.pattern),
            )
        )
    diagnostics = [Diagnostic(d.severity, d.code, d.message, d.path) for d in catalog.diagnostics]
    diagnostics += [Diagnostic(d.severity, d.code, d.message, d.file) for d in settings.diagnostics]
    acp = ctx.toolchain.acp_backends()  # agents of their own, beside the definitions
    return AgentsListResult(
        agents=tuple(agents), diagnostics=tuple(diagnostics), backends=acp or None
    )
