"""Who may answer a child's permissions, and before which effects its CLI asks.

`approvals` other than `cli` needs a CLI that asks before its tools run: pi has no
permission prompts, and a plain command has no protocol to ask in, so they take only
`cli` (`approvals-unsupported`, found when the item is planned: a launch is never
rendered with approvals its driver would refuse). Claude Code and Codex ask, but not
before every use of every effect: what each asks for is its backend's `asked_tools`,
tool by tool (backends/claude.py, codex.py `ASKED`), and the receipts say for each
effect of a child whether a tool can use it unasked (`best-effort`) or never
(`host-hard`).

A configured ACP agent (backends/acp.py) is known by its tool kinds, not by tool names:
with `client` or `policy` its session is put in its mode that asks before edits and
commands (backends/interactive/acp_client.py `asking_mode`), so its `asked_tools` are
the kinds `ASKED_KINDS` and it may run the others unasked. Its `other` kind says
nothing of what a tool does: it may be anything, and is never counted as asked, but
under `policy` it is among its `policy_kept_tools`, so it does not refuse a narrower
`access` either (every narrowed access would be refused, since any tool may be
`other`): the receipt names each of its effects `best-effort` (protocol.md §24.4).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Set
from typing import Final

from subagent_host.backends.base import NO_TOOLS, Backend
from subagent_host.backends.interactive import command_lines, pi_rpc
from subagent_host.backends.interactive.base import APPROVALS_UNSUPPORTED, approvals_supported
from subagent_host.planning.views import ApprovalsReceipt, EffectApproval, Enforcement
from subagent_host.values.choices import Approvals, Effect

# The approvals each backend's driver takes (backends/interactive/); any other: all of them.
SUPPORTED: Final[Mapping[str, Set[Approvals]]] = {
    "pi": pi_rpc.APPROVALS,
    "command": command_lines.APPROVALS,
}
EVERY_APPROVALS: Final = frozenset(Approvals)

ANSWERED_BY: Final = {
    Approvals.CLIENT: "a client of the run's session answers (run/permit)",
    Approvals.POLICY: "the server answers from the child's access",
}


def host_answered(backend: Backend, approvals: Approvals) -> Mapping[str, frozenset[Effect]]:
    """Per tool, the effects beyond the child's access a tool of it may have and still be
    kept (planning/access.py `negotiate`): its backend's `policy_kept_tools` under `policy`
    (those whose every use the host answers, and an ACP agent's `other`, whatever it does:
    the receipt says so); none under any other approvals."""
    return backend.policy_kept_tools if approvals is Approvals.POLICY else NO_TOOLS


def unsupported(backend: str, approvals: Approvals) -> str | None:
    """Why `backend` cannot take `approvals` (the driver's own words), or None when it can
    (every configured ACP agent takes each: SUPPORTED does not name it)."""
    try:
        approvals_supported(backend, approvals, SUPPORTED.get(backend, EVERY_APPROVALS))
    except ValueError as exc:
        return str(exc).removeprefix(f"{APPROVALS_UNSUPPORTED}: ")
    return None


def approvals_receipt(
    backend: Backend, approvals: Approvals, tools: Mapping[str, Collection[Effect]]
) -> ApprovalsReceipt | None:
    """For each effect of the kept `tools`, whether the CLI asks before every use of it;
    None for `cli` (nobody is asked)."""
    if approvals is Approvals.CLI:
        return None
    asked = backend.asked_tools
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
