"""Token and cost budgets: what an agent child has spent, as its CLI's events report it.

A child's `maxTokens` counts its input and output tokens, `maxCostUsd` its cost, both
summed over the attempt as the parser's `usage` holds them (protocol.md §11: every CLI's
usage is summed into one running total, whether the CLI reports it per response, pi
and claude, or per turn, codex). Cache reads and writes are not counted: they are
reported apart from `inputTokens` by every CLI, and what they cost is in `costUsd`.

The server can only enforce a budget its CLI reports while the child runs: pi reports
tokens and cost with each response; claude reports tokens with each response but its
cost only in its final result; codex reports its usage (tokens only) only when its turn,
the whole task, ends. A budget a backend cannot see being spent is refused, never
accepted and silently not enforced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from subagent_host.values.choices import ACP, ReachedLimit
from subagent_host.values.facts import Usage

MAX_TOKENS: Final = "maxTokens"
MAX_COST_USD: Final = "maxCostUsd"
BUDGETS: Final = (MAX_TOKENS, MAX_COST_USD)
# The `reachedLimit` (and the child's `reason`) of a child ended at its budget.
MAX_TOKENS_LIMIT: Final = ReachedLimit.MAX_TOKENS
MAX_COST_LIMIT: Final = ReachedLimit.MAX_COST
# The diagnostic codes of a budget the backend cannot enforce.
TOKENS_NOT_REPORTED: Final = "tokens-not-reported"
COST_NOT_REPORTED: Final = "cost-not-reported"
NOT_REPORTED: Final = {MAX_TOKENS: TOKENS_NOT_REPORTED, MAX_COST_USD: COST_NOT_REPORTED}

# Why each backend cannot enforce a budget, by backend id then budget; a budget not
# listed is reported while the child runs. `command` takes no budget at all (like
# `maxTurns`: planning refuses it as `not-honoured`).
_UNREPORTED: Final[Mapping[str, Mapping[str, str]]] = {
    "claude": {
        MAX_COST_USD: "claude reports its cost only in its final result, once the child has "
        "ended, so a cost budget cannot stop it",
    },
    "codex": {
        MAX_TOKENS: "codex reports its usage only when its turn (the whole task) ends, so a "
        "token budget cannot stop it",
        MAX_COST_USD: "codex reports no cost",
    },
    # Every configured ACP agent (values/choices.py ACP): the protocol carries no usage
    # a client can count on while a turn runs (some agents add theirs, others none).
    ACP: {
        MAX_TOKENS: "an ACP agent reports tokens only if it chooses to (the protocol "
        "does not require it), so a token budget could go unenforced",
        MAX_COST_USD: "an ACP agent reports no cost the server can read while it runs",
    },
}


def unreported(backend: str, budget: str) -> str | None:
    """Why `backend` cannot enforce `budget` (`maxTokens` or `maxCostUsd`); None when it can."""
    return _UNREPORTED.get(backend, {}).get(budget)


def tokens_of(usage: Usage) -> int:
    """The tokens a token budget counts: input and output (not the cache's)."""
    return usage.input_tokens + usage.output_tokens


@attrs.frozen
class Budget:
    """A child's budgets; None: that one is not set."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None

    @property
    def is_set(self) -> bool:
        return self.max_tokens is not None or self.max_cost_usd is not None

    def reached(self, usage: Usage | None) -> ReachedLimit | None:
        """The `reachedLimit` of the first budget `usage` has reached; None while within."""
        if usage is None:
            return None
        if self.max_tokens is not None and tokens_of(usage) >= self.max_tokens:
            return MAX_TOKENS_LIMIT
        cost = usage.cost_usd
        if self.max_cost_usd is not None and cost is not None and cost >= self.max_cost_usd:
            return MAX_COST_LIMIT
        return None
