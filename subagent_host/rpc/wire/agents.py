"""`agents/list`: the agent definitions a spawn can use."""

from __future__ import annotations

import attrs

from subagent_host.values import Mode
from subagent_host.values.choices import AgentBackendName, AgentSource, DisabledBy
from subagent_host.values.facts import BackendInfo, Diagnostic


@attrs.frozen
class AgentsListParams:
    all_: bool | None = None
    """Wire name `all`: true lists the agents the configuration disables too, each with
    `disabled` saying why; absent or false: only those `spawn {agent}` can use."""


@attrs.frozen
class AgentDisabledInfo:
    """Why the configuration's `agents` lists disable an agent (protocol.md §19)."""

    by: DisabledBy
    """`agents.disabled` (a pattern of that list matches the name; it wins over any enabled
    one) or `agents.enabled` (that list does not name the agent)."""
    file: str
    """The configuration file whose list decided."""
    pattern: str | None = None
    """The `agents.disabled` pattern that matches; absent for `agents.enabled`."""


@attrs.frozen
class AgentInfo:
    """One agent definition, with what it would run with: one `spawn {agent}` can use,
    or (listed with `all: true`) one the configuration disables."""

    name: str
    """The definition's name (matched case-insensitively)."""
    description: str
    """Its frontmatter's `description`."""
    source: AgentSource
    """`user` or `project`: where the definition was found."""
    path: str
    """The definition file's path."""
    digest: str
    """`sha256:v1:` and the SHA-256 of the file's bytes."""
    model: str | None = None
    """The model a spawn of it would run with today (profiles and defaults applied); absent when
    none is set."""
    effort: str | None = None
    """The thinking effort a spawn of it would run with today; absent when none is set."""
    tools: tuple[str, ...] | None = None
    """The tools a spawn of it would get; absent: the backend's own default."""
    mode: Mode | None = None
    """`task` or `background`: the mode of a single spawn of it that names none; absent when none is
    set."""
    backend: AgentBackendName | None = None
    """The backend a spawn of it that names none runs on: its definition's `backend`, else the
    configured `default_backend`; absent when neither names one (a `claude-*` model then runs
    on claude, any other on pi)."""
    disabled: AgentDisabledInfo | None = None
    """Present when the configuration disables the agent (only with `all: true`): a spawn
    of it is refused with `agent-disabled`."""


@attrs.frozen
class AgentsListResult:
    agents: tuple[AgentInfo, ...]
    """The definitions `spawn {agent}` can use (with `all: true`, every usable definition,
    the disabled ones marked)."""
    diagnostics: tuple[Diagnostic, ...]
    """Problems of the definitions (their `path` is the file) and of the configuration files."""
    backends: tuple[BackendInfo, ...] | None = None
    """The configured ACP agents (protocol.md §24.6), each as `ping` lists it: whether it
    answered `initialize`, with its `agentInfo` and capabilities, or why it cannot run;
    absent when the configuration names none."""
