"""Is the agent definition a resume would use now the one its child was launched from?

A resume fails closed unless the name still resolves to the same file (real
path) with the same digest. A definition that appeared since in a directory
searched later (a project's, shadowing the user's) is never substituted, and
neither is an edited file, a deleted one, or one now blocked by a malformed
definition of the same name; nor is an agent the configuration now disables.
"""

from __future__ import annotations

from subagent_host.agents.definitions import AgentDefinition
from subagent_host.agents.discovery import AgentCatalog
from subagent_host.planning.views import AgentRef
from subagent_host.resuming.target import AgentCheck
from subagent_host.settings import AgentFilter


def definition_check(catalog: AgentCatalog, agents: AgentFilter) -> AgentCheck:
    def check(launched: AgentRef) -> tuple[str, str] | None:
        name, path = launched.name, launched.path
        if (disabled := agents.disabled_by(name)) is not None:
            return "agent-disabled", f"the agent {name!r} is disabled by {disabled.describe()}"
        found = catalog.lookup(name)
        if found is None:
            return "agent-definition-gone", f"the agent definition {name!r} ({path}) is gone"
        if not isinstance(found, AgentDefinition):
            return (
                "agent-definition-blocked",
                f"the agent definition {name!r} is now blocked: {found.message}",
            )
        if found.path != path:
            return (
                "agent-definition-shadowed",
                f"the agent {name!r} would now come from {found.path} ({found.source}), "
                f"not from {path} ({launched.source}), which it was launched from",
            )
        if found.digest != launched.digest:
            return (
                "agent-definition-changed",
                f"the agent definition {name!r} ({path}) has changed since its launch",
            )
        return None

    return check
