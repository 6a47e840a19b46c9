"""A backend for any agent that speaks the Agent Client Protocol (ACP), as configured.

Configuration names each one (`backends.<name> = {protocol: "acp", executable, args,
env}`, protocol.md §24.1): the server then has a backend of that name, usable wherever
`pi`, `claude` and `codex` are. Its children are always driven through the protocol
(backends/interactive/acp_client.py): even a one-shot child is a conversation, closed
when its first turn ends, so there is no output format to parse besides ACP's.

What an ACP agent's tools can do is known only by their kind (ACP's `ToolKind`, the
very enumeration this project's `tool` events use): its catalog is one entry per kind,
with what a tool of that kind may do (`KIND_EFFECTS`). Its tools cannot be chosen or
removed at launch: the agent has its own, so a request's `tools` is not honoured, and
`access` holds only where the host answers its permission requests (§24.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, NoReturn

import attrs

from subagent_host.backends.base import KIND_EFFECTS, ItemSpec, Launch
from subagent_host.values.choices import ACP, Effect, ToolKind
from subagent_host.values.facts import AcpAgentCapabilities, AcpAgentInfo

# Every kind a tool call may say, but `switch_mode` (a mode change, not a tool: read
# as `other` by the conversation).
TOOLS: Final[Mapping[str, frozenset[Effect]]] = {
    kind.value: KIND_EFFECTS[kind] for kind in ToolKind
}

ASKED_KINDS: Final = frozenset({ToolKind.EDIT, ToolKind.DELETE, ToolKind.MOVE, ToolKind.EXECUTE})
"""The kinds an agent in its asking mode asks before each use of: its mode's own words
("Require approval for file edits or shell commands", Qwen Code's `default`) name edits
and commands; a delete or a move edits files too. Its reads, searches, fetches, thoughts
and `other` tools may run unasked (protocol.md §24.4)."""

ASKED: Final[Mapping[str, frozenset[Effect]]] = {
    kind.value: KIND_EFFECTS[kind] for kind in ASKED_KINDS
}
"""An agent in its asking mode, by kind: each asked kind with all its effects."""

POLICY_KEPT: Final[Mapping[str, frozenset[Effect]]] = {
    **ASKED,
    ToolKind.OTHER.value: KIND_EFFECTS[ToolKind.OTHER],
}
"""What an agent under `policy` may have beyond a narrower access and still run: its
asked kinds (the host answers each use) and `other`, which says nothing of what a tool
does: it may be anything and is never counted as asked, but it does not refuse a
narrower access either (every narrowed access would be refused, since any tool may be
`other`): the receipt names each of its effects `best-effort` (protocol.md §24.4)."""


@attrs.frozen
class AcpAnswer:
    """What an agent answered to `initialize` (backends/acp_probe.py asks it)."""

    protocol_version: int
    agent_info: AcpAgentInfo | None
    capabilities: AcpAgentCapabilities
    auth_methods: tuple[str, ...]
    """Its auth methods' ids."""


class AcpBackend:
    """One configured ACP agent: its name, program, arguments and environment."""

    restrictable = False  # its tools are the agent's own: none can be removed at launch
    tools_required = False
    thinking_levels: tuple[str, ...] = ()
    env_allowed: frozenset[str] = frozenset()
    always_driven = True
    """Its children are conversations in its protocol, interactive or not."""
    asked_tools: Mapping[str, frozenset[Effect]] = ASKED
    policy_kept_tools: Mapping[str, frozenset[Effect]] = POLICY_KEPT
    tools_by_kind = True
    configures_itself = True
    cancels_turn_first = True
    """A stop sends `session/cancel` first: the agent ends its turn's tools itself."""
    protocol: Literal["acp"] | None = ACP

    def __init__(
        self,
        name: str,
        executable: str,
        args: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.id = name
        self.executable = executable
        self.args = args
        self.env: Mapping[str, str] = dict(env or {})
        self.tools: Mapping[str, frozenset[Effect]] = TOOLS

    def __repr__(self) -> str:
        return f"AcpBackend({self.id!r}, {self.executable!r})"

    def prepare(self, item: ItemSpec) -> Launch:
        """The agent in its ACP mode: the configured program and arguments, the configured
        environment under the item's own, in the item's cwd; stdin kept for the
        conversation (nothing is written at start)."""
        return Launch(
            argv=(self.executable, *self.args),
            stdin=None,
            env={**self.env, **item.env},
            cwd=item.cwd,
        )

    def parser(self) -> NoReturn:
        # Never called: an ACP child is always driven, and its conversation reads its
        # output (backends/interactive/driven_output.py).
        raise TypeError(f"{self.id} is an ACP agent: its children are always driven")
