"""Who may answer a child's permissions, and before which effects its CLI asks.

`approvals` other than `cli` needs a CLI that asks before its tools run: pi has no
permission prompts, and a plain command has no protocol to ask in, so they take only
`cli` (`approvals-unsupported`, found when the item is planned: a launch is never
rendered with approvals its driver would refuse). Claude Code and Codex ask, but not
before every use of every effect: what each asks for is stated here, tool by tool, and
the receipts say for each effect of a child whether a tool can use it unasked
(`best-effort`) or never (`host-hard`).

A configured ACP agent (backends/acp.py) is known by its tool kinds, not by a name in
these tables: with `client` or `policy` its session is put in its mode that asks before
edits and commands (backends/interactive/acp_client.py `asking_mode`), so it asks before
every tool of the kinds `ASKED_KINDS` and may run the others unasked. Its `other` kind
says nothing of what a tool does: it may be anything, and is never counted as asked,
but under `policy` it does not refuse a narrower `access` either (every narrowed access
would be refused, since any tool may be `other`): the receipt names each of its effects
`best-effort` (protocol.md §24.4).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Set
from typing import Final

from subagent_host.backends import claude, codex
from subagent_host.backends.acp import ASKED_KINDS, AcpBackend
from subagent_host.backends.base import KIND_EFFECTS, Backend
from subagent_host.backends.interactive import command_lines, pi_rpc
from subagent_host.backends.interactive.base import APPROVALS_UNSUPPORTED, approvals_supported
from subagent_host.planning.views import ApprovalsReceipt, EffectApproval, Enforcement
from subagent_host.values.choices import Approvals, Effect, ToolKind

FILESYSTEM_READ: Final = Effect.FILESYSTEM_READ
FILESYSTEM_WRITE: Final = Effect.FILESYSTEM_WRITE
NETWORK: Final = Effect.NETWORK

# The approvals each backend's driver takes (backends/interactive/); any other: all of them.
SUPPORTED: Final[Mapping[str, Set[Approvals]]] = {
    "pi": pi_rpc.APPROVALS,
    "command": command_lines.APPROVALS,
}
EVERY_APPROVALS: Final = frozenset(Approvals)

# For each CLI that asks, by tool: the effects it asks before every use of. Claude Code
# (`--permission-mode default`) asks before each Write and Edit and each Bash command it
# does not deem read-only (a command that writes or reaches the network is not; `ls` or
# `sleep` runs unasked); its reads and web tools are not counted as asked. Codex
# (`approvalPolicy: "untrusted"`) asks before each patch and each command it does not
# know to be harmless; its web search (the networked tier's) runs unasked.
ASKED: Final[Mapping[str, Mapping[str, frozenset[Effect]]]] = {
    "claude": {
        "Bash": frozenset({FILESYSTEM_WRITE, NETWORK}),
        "Edit": frozenset({FILESYSTEM_READ, FILESYSTEM_WRITE}),
        "Write": frozenset({FILESYSTEM_WRITE}),
    },
    "codex": {
        codex.WORKSPACE_WRITE: frozenset({FILESYSTEM_WRITE}),
        codex.WORKSPACE_NETWORK: frozenset({FILESYSTEM_WRITE}),
    },
}
# The tools whose asked effects the host answers for under `approvals: "policy"`, so
# that narrowing keeps them (the host rejects each use beyond the child's access, as the
# receipts' `host-hard` says). Claude Code's: nothing else stops its tools. Not codex's:
# its "tools" are sandbox tiers, and a narrower tier is the operating system's refusal,
# harder than any answer, so narrowing still picks it.
HOST_ANSWERED: Final[Mapping[str, Mapping[str, frozenset[Effect]]]] = {
    "claude": ASKED["claude"],
}
# The tool tables ASKED names its tools from (a test checks each name is one of them).
TOOL_TABLES: Final = {"claude": claude.TOOLS, "codex": codex.TOOLS}

ANSWERED_BY: Final = {
    Approvals.CLIENT: "a client of the run's session answers (run/permit)",
    Approvals.POLICY: "the server answers from the child's access",
}


# An ACP agent in its asking mode: the kinds it asks before, each with all its effects.
ACP_ASKED: Final[Mapping[str, frozenset[Effect]]] = {
    kind.value: KIND_EFFECTS[kind] for kind in ASKED_KINDS
}
# What an ACP agent under `policy` may have beyond a narrower access and still run: its
# asked kinds (the host answers each use) and `other` (see the module's docstring).
ACP_POLICY_KEPT: Final[Mapping[str, frozenset[Effect]]] = {
    **ACP_ASKED,
    ToolKind.OTHER.value: KIND_EFFECTS[ToolKind.OTHER],
}


def host_answered(backend: Backend, approvals: Approvals) -> Mapping[str, frozenset[Effect]]:
    """Per tool, the effects beyond the child's access a tool of it may have and still be
    kept (planning/access.py `negotiate`): those whose every use the host answers, under
    `policy` (and an ACP agent's `other`, whatever it does: the receipt says so)."""
    if approvals is not Approvals.POLICY:
        return {}
    if isinstance(backend, AcpBackend):
        return ACP_POLICY_KEPT
    return HOST_ANSWERED.get(backend.id, {})


def unsupported(backend: str, approvals: Approvals) -> str | None:
    """Why `backend` cannot take `approvals` (the driver's own words), or None when it can
    (every configured ACP agent takes each: SUPPORTED does not name it)."""
    try:
        approvals_supported(backend, approvals, SUPPORTED.get(backend, EVERY_APPROVALS))
    except ValueError as exc:
        return str(exc).removeprefix(f"{APPROVALS_UNSUPPORTED}: ")
    return None


def asked_tools(backend: Backend) -> Mapping[str, frozenset[Effect]]:
    """Per tool, the effects `backend`'s CLI asks before every use of, when it asks."""
    return ACP_ASKED if isinstance(backend, AcpBackend) else ASKED.get(backend.id, {})


def approvals_receipt(
    backend: Backend, approvals: Approvals, tools: Mapping[str, Collection[Effect]]
) -> ApprovalsReceipt | None:
    """For each effect of the kept `tools`, whether the CLI asks before every use of it;
    None for `cli` (nobody is asked)."""
    if approvals is Approvals.CLI:
        return None
    asked = asked_tools(backend)
    effects = sorted({effect for kept in tools.values() for effect in kept})
    return ApprovalsReceipt(
        approvals,
        tuple(_effect(backend.id, approvals, effect, tools, asked) for effect in effects),
    )


def _effect(
    backend: str,
    approvals: Approvals,
    effect: Effect,
    tools: Mapping[str, Collection[Effect]],
    asked: Mapping[str, frozenset[Effect]],
) -> EffectApproval:
    unasked = sorted(
        name
        for name, effects in tools.items()
        if effect in effects and effect not in asked.get(name, ())
    )
    if not unasked:
        return EffectApproval(
            effect,
            Enforcement.HOST_HARD,
            f"{backend} asks before every use, and {ANSWERED_BY[approvals]}",
        )
    return EffectApproval(
        effect,
        Enforcement.BEST_EFFORT,
        f"{backend} uses it through {', '.join(unasked)} without always asking",
    )
